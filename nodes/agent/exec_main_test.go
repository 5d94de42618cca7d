package agent_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// fakeBins holds the fake agent executables, built once per package run.
var fakeBins = map[string]string{}

// TestMain builds the fake agents (testdata/fake*) and fails the run if any
// goroutine outlives the tests. (The only TestMain of package agent_test:
// other test files of the package rely on it.)
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "switchyard-fakeagents-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, name := range []string{"claude", "codex", "gemini"} {
		out := filepath.Join(dir, "fake"+name)
		cmd := exec.Command("go", "build", "-o", out, "./testdata/fake"+name)
		if b, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build fake%s: %v\n%s", name, err, b)
			os.RemoveAll(dir)
			os.Exit(1)
		}
		fakeBins[name] = out
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
