package actors

import (
	"strings"
	"sync"

	"github.com/switchyard/switchyard/nodes"
)

// threadTable holds the session's agent threads: the context keys under
// nodes.ThreadKeyPrefix that handlers set (a thread name → the CLI's
// session id). Every firing finds them in its context, whatever envelope
// fired it — a chat message from outside, a tick, a handoff — so an
// agent's conversation survives across firings and, seeded from the
// checkpoint, across a resume.
//
// Threads seeded from a checkpoint are stale: the process that held their
// CLI sessions is gone (and may have been on another machine). Until a run
// records a new session for such a thread, every firing's context says so
// (<key>.stale = "1"), and the agent starts afresh with a summary of the
// context instead of resuming (spec 5.4, resume after full fidelity).
type threadTable struct {
	mu    sync.RWMutex
	m     map[string]string
	stale map[string]bool
}

// seed fills an empty table with a checkpoint's threads, all stale.
func (t *threadTable) seed(threads map[string]string) {
	t.m, t.stale = map[string]string{}, map[string]bool{}
	for k, v := range threads {
		t.m[k] = v
		if isThreadID(k) {
			t.stale[k] = true
		}
	}
}

// isThreadID reports whether k holds a session id (not the .provider or
// .stale note of one).
func isThreadID(k string) bool {
	return !strings.HasSuffix(k, nodes.ThreadProviderSuffix) && !strings.HasSuffix(k, nodes.ThreadStaleSuffix)
}

// learn records the thread keys of a firing's context updates.
func (t *threadTable) learn(updates map[string]string) {
	for k, v := range updates {
		if strings.HasPrefix(k, nodes.ThreadKeyPrefix) {
			t.mu.Lock()
			if t.m == nil {
				t.m, t.stale = map[string]string{}, map[string]bool{}
			}
			t.m[k] = v
			delete(t.stale, k)
			t.mu.Unlock()
		}
	}
}

// fill adds the known threads a context lacks, noting the keys in changed.
func (t *threadTable) fill(ctx map[string]string, changed *[]string) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for k, v := range t.m {
		if _, ok := ctx[k]; !ok {
			ctx[k] = v
			*changed = append(*changed, k)
		}
	}
	for k := range t.stale {
		ctx[k+nodes.ThreadStaleSuffix] = "1"
		*changed = append(*changed, k+nodes.ThreadStaleSuffix)
	}
}
