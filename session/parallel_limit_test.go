package session_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/nodes"
)

// TestMaxParallelBoundsRunningBranches: a parallel node with five
// branches and max_parallel=2 never has more than two of them running;
// each branch is two nodes long and holds its slot until it reaches the
// join. The branches' handlers block until the test releases them.
func TestMaxParallelBoundsRunningBranches(t *testing.T) {
	branches := `
		fork [shape=component, max_parallel=2]
		join [shape=tripleoctagon]
		b1 [type="custom.echo"]; b2 [type="custom.echo"]; b3 [type="custom.echo"]; b4 [type="custom.echo"]; b5 [type="custom.echo"]
		c1 [type="custom.echo"]; c2 [type="custom.echo"]; c3 [type="custom.echo"]; c4 [type="custom.echo"]; c5 [type="custom.echo"]
		fork -> b1 -> c1 -> join
		fork -> b2 -> c2 -> join
		fork -> b3 -> c3 -> join
		fork -> b4 -> c4 -> join
		fork -> b5 -> c5 -> join`
	for _, tc := range []struct{ name, src string }{
		{"pipeline", `digraph p { start [shape=Mdiamond]; exit [shape=Msquare]; start -> fork; join -> exit` + branches + ` }`},
		{"session", `digraph s { kind="session"` + branches + ` }`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRun(t)
			cfg := r.config(r.load(tc.src))
			var mu sync.Mutex
			running := map[string]bool{} // branch (b1..b5) -> running
			most := 0
			started := make(chan string, 20)
			var gmu sync.Mutex
			gates := map[string]chan struct{}{}
			gate := func(node string) chan struct{} {
				gmu.Lock()
				defer gmu.Unlock()
				if gates[node] == nil {
					gates[node] = make(chan struct{})
				}
				return gates[node]
			}
			require.NoError(t, cfg.Registry.Replace(nodes.Info{Type: "custom.echo", Handler: nodes.HandlerFunc(
				func(ctx context.Context, in *nodes.Input) (*nodes.Outcome, error) {
					branch := in.Context["parallel.branch"]
					mu.Lock()
					running[branch] = true
					if len(running) > most {
						most = len(running)
					}
					mu.Unlock()
					started <- in.Node.ID
					select {
					case <-gate(in.Node.ID):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
					if in.Node.ID[0] == 'c' { // the branch's last node: it reaches the join
						mu.Lock()
						delete(running, branch)
						mu.Unlock()
					}
					return &nodes.Outcome{Status: nodes.StatusSuccess}, nil
				})}))
			l := startLive(t, r, cfg)
			if tc.name == "session" {
				l.publish(t, broker.NodeIn(l.s.ID(), "fork"), "go")
			}
			deadline := time.After(30 * time.Second)
			wait := func() string {
				select {
				case n := <-started:
					return n
				case <-deadline:
					t.Fatal("a branch node did not start")
					return ""
				}
			}
			// Two branches start at once. Releasing a branch's first node
			// starts its second; releasing a second node ends the branch
			// and starts the next branch, while one is left.
			blocked := []string{wait(), wait()}
			bStarted := 2
			for len(blocked) > 0 {
				x := blocked[0]
				blocked = blocked[1:]
				close(gate(x))
				if x[0] == 'b' || bStarted < 5 {
					y := wait()
					if y[0] == 'b' {
						bStarted++
					}
					blocked = append(blocked, y)
				}
			}
			l.waitEvent(t, "join completed", completedBy("join"))
			mu.Lock()
			defer mu.Unlock()
			require.Equal(t, 2, most, "at most max_parallel branches run at once (and that many do)")
			if tc.name == "pipeline" {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				rep, err := l.s.Wait(ctx)
				require.NoError(t, err)
				require.Equal(t, "success", rep.Status, rep.Reason)
			}
		})
	}
}
