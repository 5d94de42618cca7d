// Package crash lets tests kill the process at named points of the
// runtime, to prove that a crash anywhere loses and duplicates nothing.
//
// A point is a call Point("name") on a path where a crash matters (between
// a commit and a publish, in the middle of a handler...). It does nothing
// unless the environment variable SWITCHYARD_CRASH names it:
//
//	SWITCHYARD_CRASH=after-commit:3
//
// kills the process with SIGKILL (no deferred function, no flush, like a
// power cut or the OOM killer) the third time the point is reached. The
// check costs one atomic load when the variable is unset.
package crash

import (
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
)

// Env is the environment variable that arms a point.
const Env = "SWITCHYARD_CRASH"

var (
	armed atomic.Bool
	name  string
	at    int64
	hits  atomic.Int64
)

func init() {
	spec := os.Getenv(Env)
	if spec == "" {
		return
	}
	n, count, ok := strings.Cut(spec, ":")
	at = 1
	if ok {
		if v, err := strconv.ParseInt(count, 10, 64); err == nil && v > 0 {
			at = v
		}
	}
	name = n
	armed.Store(true)
}

// Point kills the process if it is the armed point and this is the armed
// hit.
func Point(p string) {
	if !armed.Load() || p != name {
		return
	}
	if hits.Add(1) == at {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}

// Armed reports whether a point is armed (for logs).
func Armed() string {
	if !armed.Load() {
		return ""
	}
	return name + ":" + strconv.FormatInt(at, 10)
}
