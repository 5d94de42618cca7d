package nodes_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/nodes"
	"github.com/switchyard/switchyard/nodes/agent"
)

// fileWriter is an agent that changes files in its work dir.
type fileWriter struct {
	t    *testing.T
	do   func(t *testing.T, dir string)
	last *agent.Request
}

func (w *fileWriter) Name() string { return "writer" }

func (w *fileWriter) Run(_ context.Context, req *agent.Request, _ func(agent.Event)) (*agent.Result, error) {
	w.last = req
	w.do(w.t, req.WorkDir)
	return &agent.Result{Text: "done", Success: true, Usage: agent.Usage{InputTokens: 7}}, nil
}

func gitRun(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=T", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}, args...)...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

func put(t *testing.T, dir, rel, content string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func read(t *testing.T, dir, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}

func missing(t *testing.T, dir, rel string) bool {
	t.Helper()
	_, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(rel)))
	return os.IsNotExist(err)
}

// newRepo is a git repository with a commit of main.go, README.md,
// dirty.go and docs/plan.md; dirty.go is then modified and notes.txt
// untracked (a work tree with uncommitted work in it).
func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q")
	put(t, dir, "main.go", "package main\n")
	put(t, dir, "README.md", "# readme\n")
	put(t, dir, "dirty.go", "package dirty\n")
	put(t, dir, "docs/plan.md", "plan v1\n")
	gitRun(t, dir, "add", "-A")
	gitRun(t, dir, "commit", "-q", "-m", "init")
	put(t, dir, "dirty.go", "package dirty // work in progress\n")
	put(t, dir, "notes.txt", "my notes\n")
	return dir
}

const planningGraph = `digraph p {
	workflow_mode="planning"
	start [shape=Mdiamond]
	exit [shape=Msquare]
	plan [prompt="Plan the work"]
	start -> plan -> exit
}`

// planningInput is the input of node plan working in dir, with its run
// directory elsewhere (or in logs when given).
func planningInput(t *testing.T, src, dir, logs string) *nodes.Input {
	t.Helper()
	in := input(t, load(t, src), "plan")
	if logs == "" {
		logs = t.TempDir()
	}
	in.WorkDir, in.LogsDir, in.StageDir = dir, logs, filepath.Join(logs, "plan")
	return in
}

func porcelain(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(strings.TrimRight(gitRun(t, dir, "status", "--porcelain", "--untracked-files=all"), "\n"), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

func TestPlanningGitRevertsChangesOutsideDocs(t *testing.T) {
	dir := newRepo(t)
	w := &fileWriter{t: t, do: func(t *testing.T, dir string) {
		put(t, dir, "docs/plan.md", "plan v2\n") // allowed
		put(t, dir, "docs/new/design.md", "design\n")
		put(t, dir, "main.go", "package main // changed\n")
		require.NoError(t, os.Remove(filepath.Join(dir, "README.md")))
		put(t, dir, "newdir/x.go", "package x\n")
		put(t, dir, "staged.go", "package staged\n")
		gitRun(t, dir, "add", "staged.go")
		put(t, dir, "dirty.go", "package dirty // the agent's\n")
	}}
	in := planningInput(t, planningGraph, dir, "")
	var emitted []string
	in.Emit = func(kind string, f map[string]any) { emitted = append(emitted, kind) }
	o := handle(t, registry(t, nodes.Deps{Providers: providers(w, nil)}), in)

	require.Equal(t, nodes.StatusFail, o.Status)
	require.Equal(t, "planning", w.last.Attrs["workflow_mode"], "the graph's mode reaches the provider (its permissions)")
	require.Equal(t, "workflow_mode=planning allows changes under docs/ only; the agent changed "+
		"README.md, dirty.go, main.go, newdir/x.go, staged.go; "+
		"reverted: README.md, main.go, newdir/x.go, staged.go; "+
		"NOT restored: dirty.go (it had uncommitted changes before the run)", o.FailureReason)
	require.Equal(t, agent.Usage{InputTokens: 7}, o.Usage)
	require.Equal(t, []string{"agent.planning_violation"}, emitted)

	require.Equal(t, "package main\n", read(t, dir, "main.go"), "a tracked file is checked out again")
	require.Equal(t, "# readme\n", read(t, dir, "README.md"), "a deleted tracked file is restored")
	require.True(t, missing(t, dir, "newdir/x.go"), "a new file is removed")
	require.True(t, missing(t, dir, "staged.go"), "a new staged file is removed")
	require.Equal(t, "plan v2\n", read(t, dir, "docs/plan.md"), "docs/ is the agent's")
	require.Equal(t, "design\n", read(t, dir, "docs/new/design.md"))
	require.Equal(t, "my notes\n", read(t, dir, "notes.txt"), "untouched untracked files stay")
	require.Equal(t, []string{" M dirty.go", " M docs/plan.md", "?? docs/new/design.md", "?? notes.txt"}, porcelain(t, dir))

	sf, ok, err := nodes.ReadStatusFile(in.StageDir)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "fail", sf.Outcome)
}

func TestPlanningGitCommitIsReported(t *testing.T) {
	dir := newRepo(t)
	w := &fileWriter{t: t, do: func(t *testing.T, dir string) {
		put(t, dir, "main.go", "package main // committed\n")
		gitRun(t, dir, "commit", "-q", "-am", "sneaky")
	}}
	o := handle(t, registry(t, nodes.Deps{Providers: providers(w, nil)}), planningInput(t, planningGraph, dir, ""))
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Contains(t, o.FailureReason, "the agent changed dirty.go, main.go")
	require.Contains(t, o.FailureReason, "dirty.go (committed: HEAD moved from ")
	require.Contains(t, o.FailureReason, "main.go (committed: HEAD moved from ")
	require.NotContains(t, o.FailureReason, "reverted", "commits are not undone")
}

func TestPlanningAllowsDocsAndTheRunDirectory(t *testing.T) {
	dir := newRepo(t)
	w := &fileWriter{t: t, do: func(t *testing.T, dir string) {
		put(t, dir, "docs/plan.md", "plan v2\n")
		put(t, dir, "docs/extra.md", "more\n")
	}}
	// The run directory is inside the repository: Switchyard's files
	// (prompt.md, status.json...) are not the agent's changes.
	in := planningInput(t, planningGraph, dir, filepath.Join(dir, ".switchyard", "runs", "s1"))
	o := handle(t, registry(t, nodes.Deps{Providers: providers(w, nil)}), in)
	require.Equal(t, nodes.StatusSuccess, o.Status, o.FailureReason)
	require.Equal(t, "plan v2\n", read(t, dir, "docs/plan.md"))
	require.FileExists(t, filepath.Join(in.StageDir, "prompt.md"))
}

func TestPlanningOnlyInPlanningMode(t *testing.T) {
	for name, src := range map[string]string{
		"unset":                  strings.Replace(planningGraph, `workflow_mode="planning"`, "", 1),
		"implementation":         strings.Replace(planningGraph, `workflow_mode="planning"`, `workflow_mode="implementation"`, 1),
		"the node's mode counts": strings.Replace(planningGraph, `prompt="Plan the work"`, `prompt="Plan the work", workflow_mode="implementation"`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			dir := newRepo(t)
			w := &fileWriter{t: t, do: func(t *testing.T, dir string) { put(t, dir, "main.go", "package main // changed\n") }}
			o := handle(t, registry(t, nodes.Deps{Providers: providers(w, nil)}), planningInput(t, src, dir, ""))
			require.Equal(t, nodes.StatusSuccess, o.Status, o.FailureReason)
			require.Equal(t, "package main // changed\n", read(t, dir, "main.go"))
		})
	}
	// A node may ask for planning in a graph that does not.
	dir := newRepo(t)
	w := &fileWriter{t: t, do: func(t *testing.T, dir string) { put(t, dir, "main.go", "package main // changed\n") }}
	src := strings.Replace(strings.Replace(planningGraph, `workflow_mode="planning"`, "", 1), `prompt="Plan the work"`, `prompt="Plan the work", workflow_mode="planning"`, 1)
	o := handle(t, registry(t, nodes.Deps{Providers: providers(w, nil)}), planningInput(t, src, dir, ""))
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Equal(t, "package main\n", read(t, dir, "main.go"))
}

func TestPlanningWithoutGit(t *testing.T) {
	dir := t.TempDir()
	put(t, dir, "keep.txt", "keep\n")
	put(t, dir, "edit.txt", "v1\n")
	put(t, dir, "gone.txt", "bye\n")
	put(t, dir, "docs/plan.md", "plan v1\n")
	w := &fileWriter{t: t, do: func(t *testing.T, dir string) {
		put(t, dir, "docs/plan.md", "plan v2 — longer\n")
		put(t, dir, "docs/sub/new.md", "new\n")
		put(t, dir, "new.txt", "new\n")
		put(t, dir, "sub/deeper/x.txt", "x\n")
		put(t, dir, "edit.txt", "v2 — longer\n")
		require.NoError(t, os.Remove(filepath.Join(dir, "gone.txt")))
	}}
	o := handle(t, registry(t, nodes.Deps{Providers: providers(w, nil)}), planningInput(t, planningGraph, dir, ""))
	require.Equal(t, nodes.StatusFail, o.Status)
	require.Equal(t, "workflow_mode=planning allows changes under docs/ only; the agent changed "+
		"edit.txt, gone.txt, new.txt, sub/, sub/deeper/, sub/deeper/x.txt; "+
		"reverted: new.txt, sub/deeper/x.txt, sub/deeper/, sub/; "+
		"NOT restored: edit.txt (modified; not a git repository, so there is no copy to restore), "+
		"gone.txt (deleted; not a git repository, so there is no copy to restore)", o.FailureReason)
	require.True(t, missing(t, dir, "new.txt"))
	require.True(t, missing(t, dir, "sub"), "new directories are removed")
	require.Equal(t, "v2 — longer\n", read(t, dir, "edit.txt"))
	require.Equal(t, "keep\n", read(t, dir, "keep.txt"))
	require.Equal(t, "plan v2 — longer\n", read(t, dir, "docs/plan.md"))
	require.Equal(t, "new\n", read(t, dir, "docs/sub/new.md"))

	// Only docs/ changed: success.
	w.do = func(t *testing.T, dir string) { put(t, dir, "docs/plan.md", "plan v3\n") }
	o = handle(t, registry(t, nodes.Deps{Providers: providers(w, nil)}), planningInput(t, planningGraph, dir, ""))
	require.Equal(t, nodes.StatusSuccess, o.Status, o.FailureReason)
}
