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
type threadTable struct {
	mu sync.RWMutex
	m  map[string]string
}

// learn records the thread keys of a firing's context updates.
func (t *threadTable) learn(updates map[string]string) {
	for k, v := range updates {
		if strings.HasPrefix(k, nodes.ThreadKeyPrefix) {
			t.mu.Lock()
			if t.m == nil {
				t.m = map[string]string{}
			}
			t.m[k] = v
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
}
