package broker_test

import (
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
)

// TestUnplaced: what waiting may cure (servers offline or not heard from
// yet) is told apart from what it cannot (storage, tags).
func TestUnplaced(t *testing.T) {
	api := func(desc string) error {
		return &jetstream.APIError{Code: 400, ErrorCode: 10005, Description: desc}
	}
	require.True(t, broker.Unplaced(api("no suitable peers for placement")))
	require.True(t, broker.Unplaced(api("no suitable peers for placement, peer offline")))
	require.True(t, broker.Unplaced(api("no suitable peers for placement, miscellaneous issue")))
	require.False(t, broker.Unplaced(api("no suitable peers for placement, insufficient storage")))
	require.False(t, broker.Unplaced(api("no suitable peers for placement, exclude tag set")))
	require.False(t, broker.Unplaced(&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}))
	require.False(t, broker.Unplaced(nil))
}
