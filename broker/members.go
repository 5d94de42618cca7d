package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MemberBucket is the KV bucket of a deployment's members: one key per
// process that runs sessions (serve --takeover or --place), whose value
// names it, its labels, its load and until when it is alive (see package
// session, placement.go). Entries older than MemberMaxAge are dropped by
// the server: a member renews its entry far more often.
const MemberBucket = "sy_members"

// MemberMaxAge is how long the member bucket keeps an entry nobody renews.
const MemberMaxAge = time.Minute

// Members creates or opens the member bucket.
func Members(ctx context.Context, js jetstream.JetStream, st Storage, opts ...Option) (jetstream.KeyValue, error) {
	o := newOptions(opts)
	kv, err := js.KeyValue(ctx, MemberBucket)
	if err == nil && o.replicas <= 1 {
		return kv, nil
	}
	if err != nil && !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("broker: bucket %s: %w", MemberBucket, err)
	}
	kv, err = placed(ctx, func() (jetstream.KeyValue, error) {
		return js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket: MemberBucket, Description: "switchyard: the processes that run sessions, their labels and load",
			Storage: st.js(), History: 1, TTL: MemberMaxAge, Replicas: o.replicasFor(ctx, js, "KV_"+MemberBucket),
		})
	})
	if err != nil {
		return nil, fmt.Errorf("broker: bucket %s: %w", MemberBucket, err)
	}
	return kv, nil
}
