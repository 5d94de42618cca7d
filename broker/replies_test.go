package broker_test

import (
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
)

func TestServerReply(t *testing.T) {
	msg := func(data string, hdr ...string) *nats.Msg {
		m := nats.NewMsg("sy.s.ctl.stop")
		m.Data = []byte(data)
		for i := 0; i+1 < len(hdr); i += 2 {
			m.Header.Set(hdr[i], hdr[i+1])
		}
		return m
	}
	for data, server := range map[string]bool{
		`{"stream":"SY_s","seq":12}`:                                                    true,
		`{"stream":"SY_s","seq":12,"duplicate":true}`:                                   true,
		`{"error":{"code":503,"err_code":10039,"description":"jetstream not enabled"}}`: true,
		`{"type":"io.nats.jetstream.api.v1.stream_info_response","error":{"code":404}}`: true,
		`{}`:           false,
		`{"node":"m"}`: false,
		`m`:            false,
		``:             false,
		`{"node":"gate","choice":"yes","by":"op"}`: false,
		`{"error":"not a JetStream error"}`:        false,
		`digraph g { a }`:                          false,
	} {
		require.Equal(t, server, broker.ServerReply(msg(data)), "%s", data)
	}
	require.True(t, broker.ServerReply(msg("", "Status", "503")), "no responders")

	for subj, ok := range map[string]bool{"_INBOX.abc.1": true, broker.RuntimeInboxPrefix + ".x.1": true,
		"sy.s.ctl.trigger": false, "": false, "_INBOXX.a": false, "$JS.API.STREAM.DELETE.SY_s": false} {
		require.Equal(t, ok, broker.ReplyInbox(subj), subj)
	}
}
