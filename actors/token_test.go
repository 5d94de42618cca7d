package actors

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// TestKVDelta: the list made from a base and the keys changed since equals
// the list made from scratch, and reuses the unchanged pairs.
func TestKVDelta(t *testing.T) {
	base := kvList(map[string]string{"b": "1", "d": "2", "f": "3"})
	cases := []struct {
		name    string
		set     map[string]string
		changed []string
	}{
		{"nothing", nil, nil},
		{"change one", map[string]string{"d": "x"}, []string{"d"}},
		{"add before, between, after", map[string]string{"a": "0", "c": "0", "z": "0"}, []string{"z", "a", "c"}},
		{"repeats", map[string]string{"b": "y"}, []string{"b", "b", "b"}},
		{"changed to the same value", map[string]string{"f": "3"}, []string{"f"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := ctxMap(base)
			for k, v := range tc.set {
				ctx[k] = v
			}
			got := kvDelta(base, ctx, append([]string(nil), tc.changed...))
			want := kvList(ctx)
			require.Equal(t, fmt.Sprint(want), fmt.Sprint(got))
			for _, kv := range got {
				if _, changed := tc.set[kv.Key]; !changed {
					require.Contains(t, base, kv, "unchanged pairs are reused")
				}
			}
		})
	}
	require.True(t, sortedKV(base))
	require.False(t, sortedKV([]*pb.KV{{Key: "b"}, {Key: "a"}}))
	require.False(t, sortedKV([]*pb.KV{{Key: "a"}, {Key: "a"}}))
}
