package proto_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runBuf runs the pinned buf (tools/go.mod) from the repository root. It
// keeps buf's standard output apart from standard error: on a fresh module
// cache the go command prints "go: downloading ..." lines on stderr while it
// builds buf, and those are not buf's findings.
func runBuf(args ...string) (stdout, stderr []byte, err error) {
	var o, e bytes.Buffer
	cmd := exec.Command("go", append([]string{"tool", "-modfile=tools/go.mod", "buf"}, args...)...)
	cmd.Dir = ".."
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.Bytes(), e.Bytes(), err
}

// buf runs buf and fails the test when it exits non-zero.
func buf(t *testing.T, args ...string) []byte {
	t.Helper()
	out, errOut, err := runBuf(args...)
	if err != nil {
		t.Fatalf("buf %v: %v\n%s%s", args, err, out, errOut)
	}
	return out
}

// lintFindings runs `buf lint` on input (relative to the repository root,
// "" for the whole workspace) and returns buf's findings: what it printed
// on stdout, or the reason when it exited non-zero without printing any.
// Whatever the go command says on stderr while it fetches and builds buf
// is not a finding.
func lintFindings(t *testing.T, input string) string {
	t.Helper()
	args := []string{"lint"}
	if input != "" {
		args = append(args, input)
	}
	out, errOut, err := runBuf(args...)
	findings := string(bytes.TrimSpace(out))
	if err != nil && findings == "" {
		findings = fmt.Sprintf("buf lint: %v\n%s", err, errOut)
	}
	return findings
}

// TestLint keeps the .proto sources clean under buf's STANDARD rules.
func TestLint(t *testing.T) {
	if findings := lintFindings(t, ""); findings != "" {
		t.Fatalf("buf lint:\n%s", findings)
	}
}

// TestLintReportsFindings keeps TestLint able to fail: a .proto file that
// breaks the STANDARD rules yields findings through the same judge.
func TestLintReportsFindings(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"buf.yaml":  "version: v2\nlint:\n  use:\n    - STANDARD\n",
		"bad.proto": "syntax = \"proto3\";\nmessage bad_name { string Field = 1; }\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	findings := lintFindings(t, dir)
	// One finding per broken rule: no package, a message name that is not
	// PascalCase, a field name that is not lower_snake_case.
	for _, at := range []string{"bad.proto:1:1:", "bad.proto:2:9:", "bad.proto:2:27:"} {
		if !strings.Contains(findings, at) {
			t.Errorf("buf lint of a bad file: no finding at %s in:\n%s", at, findings)
		}
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
