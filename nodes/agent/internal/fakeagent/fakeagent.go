package fakeagent

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"
)

var scenarioRe = regexp.MustCompile(`fake:([a-z_]+)`)

// Scenario is the behaviour the prompt asks for ("fake:NAME" anywhere in
// it), else $FAKE_SCENARIO, else "ok".
func Scenario(prompt string) string {
	if m := scenarioRe.FindStringSubmatch(prompt); m != nil {
		return m[1]
	}
	if s := os.Getenv("FAKE_SCENARIO"); s != "" {
		return s
	}
	return "ok"
}

// ReadStdin returns all of stdin.
func ReadStdin() string {
	b, _ := io.ReadAll(os.Stdin)
	return string(b)
}

// Invocation is what a fake records in $FAKE_ARGS_FILE.
type Invocation struct {
	Args  []string          `json:"args"`
	Stdin string            `json:"stdin"`
	Dir   string            `json:"dir"`
	Env   map[string]string `json:"env"`
}

// Record writes the invocation to $FAKE_ARGS_FILE when it is set.
func Record(stdin string) {
	path := os.Getenv("FAKE_ARGS_FILE")
	if path == "" {
		return
	}
	dir, _ := os.Getwd()
	inv := Invocation{Args: os.Args[1:], Stdin: stdin, Dir: dir, Env: map[string]string{}}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "SWITCHYARD_") || k == "CLAUDECODE" || k == "FAKE_EXTRA" {
			inv.Env[k] = v
		}
	}
	b, _ := json.Marshal(inv)
	_ = os.WriteFile(path, b, 0o644)
}

// Line prints v as one JSON line on stdout.
func Line(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	os.Stdout.Write(append(b, '\n'))
}

// Raw prints s and a newline on stdout.
func Raw(s string) { os.Stdout.WriteString(s + "\n") }

// Fail prints msg on stderr and exits with code.
func Fail(code int, msg string) {
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(code)
}

// Gate waits until $FAKE_GATE exists: the test creates it once it has seen
// the output printed so far, which proves that output is streamed.
func Gate() {
	path := os.Getenv("FAKE_GATE")
	if path == "" {
		return
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	Fail(9, "fake: gate never opened")
}

// WriteStatus writes status.json into $SWITCHYARD_STAGE_DIR.
func WriteStatus(outcome, label string) {
	dir := os.Getenv("SWITCHYARD_STAGE_DIR")
	if dir == "" {
		Fail(8, "fake: no SWITCHYARD_STAGE_DIR")
	}
	b, _ := json.Marshal(map[string]any{"outcome": outcome, "preferred_label": label})
	if err := os.WriteFile(dir+"/status.json", b, 0o644); err != nil {
		Fail(8, err.Error())
	}
}

// Hang starts a child that sleeps (same process group), records both pids
// in $FAKE_PID_FILE as "parent child", and sleeps; with ignoreTerm it
// ignores SIGTERM, so only SIGKILL ends it.
func Hang(ignoreTerm bool) {
	if ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	self, _ := os.Executable()
	child := exec.Command(self)
	child.Env = append(os.Environ(), "FAKE_CHILD=sleep")
	if err := child.Start(); err != nil {
		Fail(7, err.Error())
	}
	if path := os.Getenv("FAKE_PID_FILE"); path != "" {
		tmp := path + ".tmp"
		_ = os.WriteFile(tmp, []byte(fmt.Sprintf("%d %d", os.Getpid(), child.Process.Pid)), 0o644)
		_ = os.Rename(tmp, path)
	}
	time.Sleep(time.Hour)
	os.Exit(0)
}

// Child runs the sleeping child of Hang when the process is one; call it
// first in main.
func Child() {
	if os.Getenv("FAKE_CHILD") == "sleep" {
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		os.Exit(0)
	}
}

// Flag returns the value of --name (as "--name v" or "--name=v") in args;
// the last one wins, as in the real CLIs.
func Flag(args []string, name string) (val string, found bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			val, found = args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			val, found = v, true
		}
	}
	return val, found
}

// Has reports whether args holds the flag.
func Has(args []string, name string) bool {
	for _, a := range args {
		if a == name {
			return true
		}
	}
	return false
}
