package nodes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/switchyard/switchyard/clock"
)

// WorkflowPlanning is the workflow_mode in which agents may change files
// under docs/ only.
const WorkflowPlanning = "planning"

// planningMaxFiles caps the files a work directory that is not a git
// repository may hold for the planning check (it snapshots them all).
const planningMaxFiles = 20000

// planningAllowed is the directory of the work dir agents may change in
// planning mode.
const planningAllowed = "docs/"

// workflowMode is the run's workflow_mode: the node's, else the graph's.
func workflowMode(in *Input) string {
	if m := in.Node.Attrs.String("workflow_mode"); m != "" {
		return strings.ToLower(m)
	}
	if in.Graph != nil {
		return strings.ToLower(in.Graph.WorkflowMode())
	}
	return ""
}

// planningGuard checks that an agent run in planning mode changed nothing
// outside docs/: it snapshots the work tree before the run, compares after
// it and reverts what it can.
type planningGuard struct {
	dir      string   // the work dir, symlinks resolved
	excluded []string // absolute trees not checked (the run directory)
	git      *gitSnapshot
	files    map[string]fileState // not a git repository: the tree's entries
}

// fileState is what a snapshot knows of one path.
type fileState struct {
	dir   bool
	size  int64
	mtime int64
	mode  fs.FileMode
}

// startPlanningGuard snapshots the work tree before an agent run in
// planning mode. It returns nil (and a note saying why, when there is
// one) when there is nothing to check.
func startPlanningGuard(ctx context.Context, in *Input) (*planningGuard, string) {
	if workflowMode(in) != WorkflowPlanning || in.WorkDir == "" {
		return nil, ""
	}
	dir, err := filepath.Abs(in.WorkDir)
	if err == nil {
		dir, err = filepath.EvalSymlinks(dir)
	}
	if err != nil {
		return nil, "workflow_mode=planning: the work dir could not be checked: " + err.Error()
	}
	g := &planningGuard{dir: dir}
	for _, p := range []string{in.LogsDir, in.StageDir} {
		if p == "" {
			continue
		}
		if abs, err := filepath.Abs(p); err == nil {
			if r, err := filepath.EvalSymlinks(abs); err == nil {
				abs = r
			}
			g.excluded = append(g.excluded, abs)
		}
	}
	if snap, err := takeGitSnapshot(ctx, dir); err == nil {
		g.git = snap
		return g, ""
	}
	if g.isExcluded(dir) {
		return nil, "" // the work dir is in the run directory: Switchyard's own files
	}
	files, err := g.walk()
	if err != nil {
		return nil, "workflow_mode=planning: the work dir was not checked: " + err.Error()
	}
	g.files = files
	return g, ""
}

// isExcluded reports whether the absolute path is in a tree not checked.
func (g *planningGuard) isExcluded(abs string) bool {
	for _, e := range g.excluded {
		if abs == e || strings.HasPrefix(abs, e+string(filepath.Separator)) {
			return true
		}
	}
	return false
}

// allowed reports whether a path (relative to the work dir, slashes) may
// change in planning mode.
func allowed(rel string) bool { return strings.HasPrefix(rel, planningAllowed) }

// planningViolation is what an agent changed outside docs/.
type planningViolation struct {
	changed    []string // every path changed outside docs/
	reverted   []string // restored or removed
	unrestored []string // could not be restored, with why
}

func (v *planningViolation) reason() string {
	var b strings.Builder
	fmt.Fprintf(&b, "workflow_mode=planning allows changes under %s only; the agent changed %s", planningAllowed, listPaths(v.changed))
	if len(v.reverted) > 0 {
		fmt.Fprintf(&b, "; reverted: %s", listPaths(v.reverted))
	}
	if len(v.unrestored) > 0 {
		fmt.Fprintf(&b, "; NOT restored: %s", listPaths(v.unrestored))
	}
	return b.String()
}

func listPaths(ps []string) string {
	const max = 20
	if len(ps) > max {
		return strings.Join(ps[:max], ", ") + fmt.Sprintf(" and %d more", len(ps)-max)
	}
	return strings.Join(ps, ", ")
}

// finish compares the work tree with the snapshot, reverts the changes
// outside docs/ it can and returns what was changed (nil: nothing).
func (g *planningGuard) finish(ctx context.Context, clk clock.Clock) *planningViolation {
	// The run may have ended by its context (a timeout): the check and
	// the revert still happen.
	ctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), clk, time.Minute)
	defer cancel()
	if g.git != nil {
		return g.finishGit(ctx)
	}
	return g.finishTree()
}

// --- git work trees ---

// gitSnapshot is the state of a git work tree: HEAD and every path git
// status reports (untracked files one by one), keyed by the path relative
// to the repository's top.
type gitSnapshot struct {
	top   string
	head  string
	paths map[string]string // path → status and file state
}

func git(ctx context.Context, dir string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_LITERAL_PATHSPECS=1", "GIT_OPTIONAL_LOCKS=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// takeGitSnapshot fails when dir is not in a git work tree (or git is not
// installed).
func takeGitSnapshot(ctx context.Context, dir string) (*gitSnapshot, error) {
	out, err := git(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, err
	}
	top, err := filepath.EvalSymlinks(strings.TrimSpace(string(out)))
	if err != nil {
		return nil, err
	}
	s := &gitSnapshot{top: top, paths: map[string]string{}}
	if out, err := git(ctx, dir, "rev-parse", "--verify", "-q", "HEAD"); err == nil {
		s.head = strings.TrimSpace(string(out))
	}
	out, err = git(ctx, top, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return nil, err
	}
	for _, rec := range strings.Split(string(out), "\x00") {
		if len(rec) < 4 {
			continue
		}
		p := rec[3:]
		s.paths[p] = rec[:2] + "|" + statePath(filepath.Join(top, p))
	}
	return s, nil
}

// statePath fingerprints one path: type, size, modification time.
func statePath(abs string) string {
	st, err := os.Lstat(abs)
	if err != nil {
		return "missing"
	}
	return fmt.Sprintf("%v|%d|%d", st.Mode(), st.Size(), st.ModTime().UnixNano())
}

func (g *planningGuard) finishGit(ctx context.Context) *planningViolation {
	before := g.git
	after, err := takeGitSnapshot(ctx, g.dir)
	if err != nil {
		return &planningViolation{changed: []string{"(the work tree could not be checked after the run: " + err.Error() + ")"}}
	}
	v := &planningViolation{}
	// Commits: HEAD moved. What they changed is reported, not undone.
	committed := map[string]bool{}
	if before.head != "" && after.head != before.head {
		out, err := git(ctx, before.top, "diff", "--name-only", "-z", before.head, after.head)
		if err != nil {
			v.changed = append(v.changed, fmt.Sprintf("(HEAD moved from %.12s to %.12s)", before.head, after.head))
		}
		for _, p := range strings.Split(string(out), "\x00") {
			if p == "" {
				continue
			}
			committed[p] = true
			rel := g.rel(filepath.Join(before.top, p))
			if allowed(rel) || g.isExcluded(filepath.Join(before.top, p)) {
				continue
			}
			v.changed = append(v.changed, rel)
			v.unrestored = append(v.unrestored, fmt.Sprintf("%s (committed: HEAD moved from %.12s to %.12s)", rel, before.head, after.head))
		}
	}
	var checkout, remove []string // repository-relative paths
	all := map[string]bool{}
	for p := range before.paths {
		all[p] = true
	}
	for p := range after.paths {
		all[p] = true
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		was, wasDirty := before.paths[p]
		now := after.paths[p]
		if (wasDirty && was == now) || committed[p] {
			continue
		}
		abs := filepath.Join(before.top, p)
		if g.isExcluded(abs) {
			continue
		}
		rel := g.rel(abs)
		if allowed(rel) {
			continue
		}
		v.changed = append(v.changed, rel)
		switch {
		case wasDirty:
			// Its content before the run was not committed: no copy.
			v.unrestored = append(v.unrestored, rel+" (it had uncommitted changes before the run)")
		case before.head != "" && inHead(ctx, before.top, before.head, p):
			checkout = append(checkout, p)
		default:
			remove = append(remove, p)
		}
	}
	if len(checkout) > 0 {
		if _, err := git(ctx, before.top, append([]string{"checkout", before.head, "--"}, checkout...)...); err != nil {
			for _, p := range checkout {
				v.unrestored = append(v.unrestored, g.rel(filepath.Join(before.top, p))+" ("+err.Error()+")")
			}
		} else {
			for _, p := range checkout {
				v.reverted = append(v.reverted, g.rel(filepath.Join(before.top, p)))
			}
		}
	}
	for _, p := range remove {
		rel := g.rel(filepath.Join(before.top, p))
		// A new file the agent staged leaves the index too.
		_, _ = git(ctx, before.top, "rm", "-q", "--cached", "--ignore-unmatch", "--", p)
		if err := os.Remove(filepath.Join(before.top, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.unrestored = append(v.unrestored, rel+" ("+err.Error()+")")
			continue
		}
		v.reverted = append(v.reverted, rel)
	}
	sort.Strings(v.changed)
	sort.Strings(v.reverted)
	sort.Strings(v.unrestored)
	if len(v.changed) == 0 {
		return nil
	}
	return v
}

// inHead reports whether the commit has the path.
func inHead(ctx context.Context, top, head, p string) bool {
	_, err := git(ctx, top, "cat-file", "-e", head+":"+p)
	return err == nil
}

// rel is the path relative to the work dir, with slashes (../ when it is
// outside).
func (g *planningGuard) rel(abs string) string {
	r, err := filepath.Rel(g.dir, abs)
	if err != nil {
		return filepath.ToSlash(abs)
	}
	return filepath.ToSlash(r)
}

// --- other trees ---

// walk snapshots every file and directory of the work dir but .git, docs/
// and the run directory.
func (g *planningGuard) walk() (map[string]fileState, error) {
	files := map[string]fileState{}
	errTooMany := errors.New("too many files")
	err := filepath.WalkDir(g.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == g.dir {
				return err
			}
			return nil // vanished or unreadable: not ours to judge
		}
		if p == g.dir {
			return nil
		}
		rel := g.rel(p)
		if d.IsDir() && (d.Name() == ".git" || allowed(rel+"/") || g.isExcluded(p)) {
			return filepath.SkipDir
		}
		if allowed(rel) || g.isExcluded(p) {
			return nil
		}
		if len(files) >= planningMaxFiles {
			return errTooMany
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		st := fileState{dir: d.IsDir(), mode: info.Mode().Type()}
		if !st.dir {
			st.size, st.mtime = info.Size(), info.ModTime().UnixNano()
		}
		files[rel] = st
		return nil
	})
	if errors.Is(err, errTooMany) {
		return nil, fmt.Errorf("it is not a git repository and has more than %d files", planningMaxFiles)
	}
	return files, err
}

func (g *planningGuard) finishTree() *planningViolation {
	after, err := g.walk()
	if err != nil {
		return &planningViolation{changed: []string{"(the work dir could not be checked after the run: " + err.Error() + ")"}}
	}
	v := &planningViolation{}
	var newFiles, newDirs []string
	for rel, st := range after {
		was, existed := g.files[rel]
		switch {
		case !existed && st.dir:
			newDirs = append(newDirs, rel)
		case !existed:
			newFiles = append(newFiles, rel)
		case was != st:
			v.changed = append(v.changed, rel)
			v.unrestored = append(v.unrestored, rel+" (modified; not a git repository, so there is no copy to restore)")
		}
	}
	for rel, st := range g.files {
		if _, ok := after[rel]; !ok && !st.dir {
			v.changed = append(v.changed, rel)
			v.unrestored = append(v.unrestored, rel+" (deleted; not a git repository, so there is no copy to restore)")
		}
	}
	sort.Strings(newFiles)
	for _, rel := range newFiles {
		v.changed = append(v.changed, rel)
		if err := os.Remove(filepath.Join(g.dir, filepath.FromSlash(rel))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			v.unrestored = append(v.unrestored, rel+" ("+err.Error()+")")
			continue
		}
		v.reverted = append(v.reverted, rel)
	}
	// New directories, deepest first, once their new files are gone.
	sort.Sort(sort.Reverse(sort.StringSlice(newDirs)))
	for _, rel := range newDirs {
		if err := os.Remove(filepath.Join(g.dir, filepath.FromSlash(rel))); err == nil {
			v.changed = append(v.changed, rel+"/")
			v.reverted = append(v.reverted, rel+"/")
		} else if !errors.Is(err, fs.ErrNotExist) {
			v.changed = append(v.changed, rel+"/")
			v.unrestored = append(v.unrestored, rel+"/ (not empty)")
		}
	}
	if len(v.changed) == 0 {
		return nil
	}
	sort.Strings(v.changed)
	sort.Strings(v.unrestored)
	return v
}
