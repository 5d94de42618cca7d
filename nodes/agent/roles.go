package agent

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Capabilities a role or node may grant an agent (Request.Permissions).
// Each provider maps them onto its CLI's permission flags (docs/agents.md).
const (
	CapRead    = "read"    // read files (always granted)
	CapEdit    = "edit"    // edit files anywhere in the working directory
	CapShell   = "shell"   // run commands
	CapNetwork = "network" // fetch from the network
	CapAll     = "all"     // everything, without asking
	// CapEditPrefix followed by a directory ("edit:docs/") grants edits
	// under that directory only.
	CapEditPrefix = "edit:"
)

// DefaultCapabilities are granted when neither the node nor its role
// names any: a coding agent's.
var DefaultCapabilities = []string{CapRead, CapEdit, CapShell}

// Loop behaviours of a role: how it is meant to sit in a graph.
const (
	LoopOnce       = "once"       // one run per firing
	LoopUntilPass  = "until_pass" // run again (with feedback) until a verifier passes
	LoopContinuous = "continuous" // reacts to every input, keeping its thread
)

// Role is a template for an agent: system instructions, the capabilities
// it is allowed, and how it loops. Nodes select one with role=NAME.
type Role struct {
	Name         string
	Description  string
	System       string   // system instructions
	Capabilities []string // allowed capabilities (Cap…)
	Loop         string   // Loop…
	MaxTurns     int      // agent turns per run (0 = the CLI's default)
}

//go:embed roles/*.md
var builtinRoleFiles embed.FS

// BuiltinRoles returns the built-in roles: orchestrator, planner, coder,
// verifier and docreviewer.
//
// The files are parsed once per process; each call returns a map of its
// own (every Run registers the CLI agents, which parsed them every time:
// 1.5% of the CPU of a 10-node pipeline's Run).
func BuiltinRoles() map[string]Role {
	parsed, err := builtinRoles()
	if err != nil {
		panic("agent: built-in roles: " + err.Error()) // caught by the tests
	}
	roles := make(map[string]Role, len(parsed))
	for k, r := range parsed {
		r.Capabilities = slices.Clone(r.Capabilities)
		roles[k] = r
	}
	return roles
}

var builtinRoles = sync.OnceValues(func() (map[string]Role, error) { return loadRolesFS(builtinRoleFiles, "roles") })

// LoadRoles returns the built-in roles with those of dir added or
// replacing them: one file per role, NAME.md, holding a header between
// "---" lines (description, capabilities, loop, max_turns as "key: value")
// and then the system instructions.
func LoadRoles(dir string) (map[string]Role, error) {
	roles := BuiltinRoles()
	user, err := loadRolesFS(os.DirFS(dir), ".")
	if err != nil {
		return nil, fmt.Errorf("roles %s: %w", dir, err)
	}
	for k, r := range user {
		roles[k] = r
	}
	return roles, nil
}

func loadRolesFS(fsys fs.FS, dir string) (map[string]Role, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	roles := map[string]Role{}
	for _, e := range entries {
		if e.IsDir() || filepath.Ext(e.Name()) != ".md" {
			continue
		}
		data, err := fs.ReadFile(fsys, filepath.ToSlash(filepath.Join(dir, e.Name())))
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(e.Name(), ".md")
		r, err := ParseRole(name, data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		roles[name] = r
	}
	return roles, nil
}

// ParseRole reads one role file (see LoadRoles for the format).
func ParseRole(name string, data []byte) (Role, error) {
	r := Role{Name: name, Loop: LoopOnce}
	if !validRoleName(name) {
		return r, fmt.Errorf("bad role name %q (letters, digits, _ and -)", name)
	}
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if rest, ok := strings.CutPrefix(text, "---\n"); ok {
		header, body, found := strings.Cut(rest, "\n---\n")
		if !found {
			header, found = strings.CutSuffix(rest, "\n---")
			body = ""
		}
		if !found {
			return r, errors.New("header: no closing ---")
		}
		if err := r.parseHeader(header); err != nil {
			return r, err
		}
		text = body
	}
	r.System = strings.TrimSpace(text)
	if r.System == "" {
		return r, errors.New("no system instructions")
	}
	return r, nil
}

func (r *Role) parseHeader(header string) error {
	for i, line := range strings.Split(header, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			return fmt.Errorf("header line %d: want key: value", i+2)
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "description":
			r.Description = val
		case "capabilities":
			r.Capabilities = []string{}
			for _, c := range strings.Split(val, ",") {
				if c = strings.TrimSpace(c); c == "" {
					continue
				}
				if !validCapability(c) {
					return fmt.Errorf("header line %d: unknown capability %q (read, edit, edit:DIR/, shell, network, all)", i+2, c)
				}
				r.Capabilities = append(r.Capabilities, c)
			}
		case "loop":
			if val != LoopOnce && val != LoopUntilPass && val != LoopContinuous {
				return fmt.Errorf("header line %d: unknown loop %q (once, until_pass, continuous)", i+2, val)
			}
			r.Loop = val
		case "max_turns":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 {
				return fmt.Errorf("header line %d: max_turns wants a number ≥ 0", i+2)
			}
			r.MaxTurns = n
		default:
			return fmt.Errorf("header line %d: unknown key %q (description, capabilities, loop, max_turns)", i+2, key)
		}
	}
	return nil
}

func validRoleName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

func validCapability(c string) bool {
	switch c {
	case CapRead, CapEdit, CapShell, CapNetwork, CapAll:
		return true
	}
	dir, ok := strings.CutPrefix(c, CapEditPrefix)
	return ok && dir != "" && !strings.Contains(dir, "..") && !filepath.IsAbs(dir)
}

// PlanningCapabilities restricts caps for workflow_mode="planning": edits
// only under docs/, no shell (a shell could write anywhere), no "all".
func PlanningCapabilities(caps []string) []string {
	out := []string{CapRead, CapEditPrefix + "docs/"}
	if slices.Contains(caps, CapNetwork) {
		out = append(out, CapNetwork)
	}
	return out
}

// editDirs returns the directories of edit:DIR capabilities; all is true
// when plain edit (or all) is granted.
func editDirs(caps []string) (dirs []string, all bool) {
	for _, c := range caps {
		if c == CapEdit || c == CapAll {
			all = true
		}
		if d, ok := strings.CutPrefix(c, CapEditPrefix); ok {
			dirs = append(dirs, strings.TrimSuffix(d, "/")+"/")
		}
	}
	return dirs, all
}

func sortStrings(s []string) { slices.Sort(s) }
