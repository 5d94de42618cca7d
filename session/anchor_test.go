package session_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/session"
)

// The end of a named pipeline's store — its keys purged from the shared
// bucket, where nothing else was written, once it is removed (its policy
// keeps nothing) or archived — leaves the bucket's stream holding its
// anchor, one message whatever the number of sessions gone, which no
// listing shows as a session: an emptied stream made the server remove its
// last block file and make another for the next write.
func TestNamedRemovalKeepsTheSharedBucketFromEmptying(t *testing.T) {
	for _, c := range []struct {
		name   string
		policy *session.CheckpointPolicy
	}{{"removed", &session.CheckpointPolicy{}}, {"archived", nil}} {
		t.Run(c.name, func(t *testing.T) {
			r := newRun(t)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			js := r.broker.JetStream()
			for _, id := range []string{"anchored1", "anchored2"} {
				cfg := r.durable(`digraph d { start [shape=Mdiamond]; exit [shape=Msquare]; start -> exit }`, id)
				cfg.Checkpoint = c.policy
				s, rep := r.runSession(cfg)
				require.Equal(t, "success", rep.Status)
				s.Stop()
				// Removed or archived (in the background): its keys go.
				require.Eventually(t, func() bool {
					ids, err := broker.SharedSessions(ctx, js)
					return err == nil && len(ids) == 0
				}, 30*time.Second, time.Millisecond, "the keys of %s stay in the shared bucket", id)
				st, err := js.Stream(ctx, "KV_"+broker.SharedName)
				require.NoError(t, err, "the session was in the shared bucket")
				info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
				require.NoError(t, err)
				require.EqualValues(t, 1, info.State.Msgs, "after %s: the anchor alone", id)
				require.Len(t, info.State.Subjects, 1)
				for subj := range info.State.Subjects {
					require.Equal(t, "$KV."+broker.SharedName+".anchor", subj)
				}
			}
		})
	}
}
