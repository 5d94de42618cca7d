package proto_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// buf runs the pinned buf (tools/go.mod) from the repository root.
func buf(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", append([]string{"tool", "-modfile=tools/go.mod", "buf"}, args...)...)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("buf %v: %v\n%s", args, err, out)
	}
	return out
}

// TestLint keeps the .proto sources clean under buf's STANDARD rules.
func TestLint(t *testing.T) {
	if out := buf(t, "lint"); len(bytes.TrimSpace(out)) != 0 {
		t.Fatalf("buf lint:\n%s", out)
	}
}

// TestGeneratedCodeIsFresh fails when the checked-in Go code differs from
// what `go generate ./proto` produces from the .proto sources.
func TestGeneratedCodeIsFresh(t *testing.T) {
	dir := t.TempDir()
	buf(t, "generate", "-o", dir)
	fresh, err := filepath.Glob(filepath.Join(dir, "proto", "switchyard", "v1", "*.pb.go"))
	if err != nil || len(fresh) == 0 {
		t.Fatalf("buf generate produced no Go files (%v)", err)
	}
	checked, _ := filepath.Glob(filepath.Join("switchyard", "v1", "*.pb.go"))
	if len(checked) != len(fresh) {
		t.Fatalf("%d generated files checked in, %d generated now: run go generate ./proto", len(checked), len(fresh))
	}
	for _, f := range fresh {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("switchyard", "v1", filepath.Base(f)))
		if err != nil {
			t.Fatalf("%s is not checked in: run go generate ./proto", filepath.Base(f))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run go generate ./proto", filepath.Base(f))
		}
	}
}
