package actors

import (
	"slices"
	"strings"

	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
)

// ctxMap converts repeated KV into a map.
func ctxMap(kvs []*pb.KV) map[string]string {
	m := make(map[string]string, len(kvs)+8)
	for _, kv := range kvs {
		m[kv.GetKey()] = kv.GetValue()
	}
	return m
}

// kvList converts a map into repeated KV sorted by key (deterministic bytes).
func kvList(m map[string]string) []*pb.KV {
	out := make([]*pb.KV, 0, len(m))
	block := make([]pb.KV, len(m)) // one allocation for every pair
	for k, v := range m {
		kv := &block[len(out)]
		kv.Key, kv.Value = k, v
		out = append(out, kv)
	}
	// The pointers are sorted, not a list of the keys made for it.
	slices.SortFunc(out, func(a, b *pb.KV) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// cloneBranches copies a branch stack so that tokens sent on different
// edges never share it. The lists of pairs are shared: nothing changes
// one in place (recordUpdates gives the branch a new Updates list), and
// the fork's base, the whole context at the fork, was copied at every hop
// inside the branch.
func cloneBranches(bs []*pb.Branch) []*pb.Branch {
	if len(bs) == 0 {
		return nil
	}
	out := make([]*pb.Branch, len(bs))
	for i, b := range bs {
		out[i] = &pb.Branch{ForkNode: b.ForkNode, Branch: b.Branch, ForkId: b.ForkId, Width: b.Width, JoinNode: b.JoinNode,
			Base: b.Base, Updates: b.Updates}
	}
	return out
}

// recordUpdates adds updates to the innermost branch of the stack, if any,
// replacing earlier values of the same keys.
func recordUpdates(bs []*pb.Branch, updates map[string]string) {
	if len(bs) == 0 || len(updates) == 0 {
		return
	}
	top := bs[len(bs)-1]
	m := ctxMap(top.Updates)
	for k, v := range updates {
		m[k] = v
	}
	top.Updates = kvList(m)
}
