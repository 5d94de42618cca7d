package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// lastFromLeader reads the last message on subject of stream from the
// stream's leader (the STREAM.MSG.GET API), never from a replica. A
// KeyValue Get is a direct get when the bucket allows it (KV buckets do),
// and any replica within 90% of the log answers those: right after a
// server restart, one that has not caught up yet answers an old value — an
// owner's mark from before a takeover, which made a live owner conclude it
// had lost its lease. It returns jetstream.ErrKeyNotFound when the subject
// holds nothing.
func lastFromLeader(ctx context.Context, js jetstream.JetStream, stream, subject string) ([]byte, uint64, error) {
	m, err := msgGet(ctx, js, stream, struct {
		LastFor string `json:"last_by_subj"`
	}{subject})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, 0, jetstream.ErrKeyNotFound
	}
	if err != nil {
		return nil, 0, err
	}
	return m.Data, m.Seq, nil
}

// firstSince is the sequence of the stream's first message stored at or
// after from (the server's clock), read from the stream's leader. It
// returns jetstream.ErrMsgNotFound when every message is older.
func firstSince(ctx context.Context, js jetstream.JetStream, stream string, from time.Time) (uint64, error) {
	m, err := msgGet(ctx, js, stream, struct {
		StartTime time.Time `json:"start_time"`
		NoHeaders bool      `json:"no_hdr"`
	}{from, true})
	if err != nil {
		return 0, err
	}
	return m.Seq, nil
}

// storedMsg is a message as the STREAM.MSG.GET API returns it.
type storedMsg struct {
	Seq  uint64 `json:"seq"`
	Data []byte `json:"data"`
}

// msgGet asks the stream's leader for one message (the STREAM.MSG.GET
// API, req its request). It returns jetstream.ErrMsgNotFound when no
// message matches.
func msgGet(ctx context.Context, js jetstream.JetStream, stream string, req any) (*storedMsg, error) {
	prefix := js.Options().APIPrefix
	if prefix == "" {
		prefix = jetstream.DefaultAPIPrefix
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	m, err := js.Conn().RequestWithContext(ctx, prefix+"STREAM.MSG.GET."+stream, body)
	if err != nil {
		return nil, err
	}
	var resp struct {
		Error   *jetstream.APIError `json:"error"`
		Message *storedMsg          `json:"message"`
	}
	if err := json.Unmarshal(m.Data, &resp); err != nil {
		return nil, fmt.Errorf("session: stream %s: %w", stream, err)
	}
	switch {
	case resp.Error != nil && resp.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound:
		return nil, jetstream.ErrMsgNotFound
	case resp.Error != nil:
		return nil, resp.Error
	case resp.Message == nil:
		return nil, fmt.Errorf("session: stream %s: an empty reply", stream)
	}
	return resp.Message, nil
}
