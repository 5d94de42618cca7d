package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/switchyard/switchyard/actors"
	"github.com/switchyard/switchyard/broker"
	pb "github.com/switchyard/switchyard/proto/switchyard/v1"
	"github.com/switchyard/switchyard/session"
)

//go:embed assets/index.html assets/app.js assets/app.css assets/graphviz.js assets/LICENSE.graphviz
var assets embed.FS

// Info is what the view shows of a session besides its state.
type Info struct {
	// File is the DOT file the session was started from.
	File string
	// LogsDir is the session's run directory: node files are read there.
	LogsDir string
	// Durable sessions have checkpoints to show.
	Durable bool
}

// Server serves the web view of the sessions it is given. It is safe for
// concurrent use.
type Server struct {
	b    *broker.Broker
	done chan struct{}
	once sync.Once

	mu       sync.Mutex
	sessions map[string]*entry
	order    []string // session ids, first added first
}

type entry struct {
	id      string
	t       *tracker
	s       *session.Session // nil until Add
	info    Info
	started time.Time
	gone    bool // stopped and forgotten by its host
}

// New returns a Server whose actions (answers) go through b.
func New(b *broker.Broker) *Server {
	return &Server{b: b, done: make(chan struct{}), sessions: map[string]*entry{}}
}

// Close ends the live event streams (call it before shutting the HTTP
// server down).
func (s *Server) Close() { s.once.Do(func() { close(s.done) }) }

func (s *Server) entry(id string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.sessions[id]
	if e == nil {
		e = &entry{id: id, t: newTracker(), started: time.Now()}
		s.sessions[id] = e
		s.order = append(s.order, id)
	}
	return e
}

// Observe chains the view's event observer into a session's config
// (before session.Start or Resume). cfg.ID must be set.
func (s *Server) Observe(cfg *session.Config) {
	e := s.entry(cfg.ID)
	next := cfg.Observer
	cfg.Observer = func(ev *pb.Event) {
		e.t.observe(ev)
		if next != nil {
			next(ev)
		}
	}
}

// Add shows a started session; the returned func marks it gone (its
// events and files stay visible).
func (s *Server) Add(sess *session.Session, info Info) (forget func()) {
	e := s.entry(sess.ID())
	s.mu.Lock()
	e.s, e.info, e.gone = sess, info, false
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		e.gone = true
		s.mu.Unlock()
	}
}

// Handler serves the page, its assets and its API:
//
//	GET  /                                      the page
//	GET  /assets/{file}                         embedded assets
//	GET  /api/sessions                          the sessions
//	GET  /api/sessions/{id}                     a session: DOT, node states, buffers, budgets
//	GET  /api/sessions/{id}/events              its events, live (text/event-stream)
//	GET  /api/sessions/{id}/nodes/{node}        a node: explain, its files
//	GET  /api/sessions/{id}/nodes/{node}/files/{name}  one of its files
//	GET  /api/sessions/{id}/checkpoints         a durable session's checkpoints
//	POST /api/sessions/{id}/answer              {"node","choice"}: answer a human gate
//	POST /api/sessions/{id}/trigger             {"node"}: fire a node now
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	sub, _ := fs.Sub(assets, "assets")
	static := http.FileServerFS(sub)
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", cacheAssets(static)))
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		data, _ := assets.ReadFile("assets/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(data)
	})
	mux.HandleFunc("GET /api/sessions", s.list)
	mux.HandleFunc("GET /api/sessions/{id}", s.withSession(s.detail))
	mux.HandleFunc("GET /api/sessions/{id}/events", s.withSession(s.events))
	mux.HandleFunc("GET /api/sessions/{id}/nodes/{node}", s.withSession(s.nodeDetail))
	mux.HandleFunc("GET /api/sessions/{id}/nodes/{node}/files/{name}", s.withSession(s.file))
	mux.HandleFunc("GET /api/sessions/{id}/checkpoints", s.withSession(s.checkpoints))
	mux.HandleFunc("POST /api/sessions/{id}/answer", s.withSession(s.answer))
	mux.HandleFunc("POST /api/sessions/{id}/trigger", s.withSession(s.trigger))
	return mux
}

func cacheAssets(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

// withSession finds the session of the path.
func (s *Server) withSession(h func(http.ResponseWriter, *http.Request, *entry)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		s.mu.Lock()
		e := s.sessions[id]
		s.mu.Unlock()
		if e == nil {
			writeError(w, http.StatusNotFound, "no session "+id)
			return
		}
		h(w, r, e)
	}
}

// SessionSummary is one line of the sessions list.
type SessionSummary struct {
	ID      string `json:"id"`
	Graph   string `json:"graph"`
	File    string `json:"file,omitempty"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
	Started string `json:"started"`
	Durable bool   `json:"durable"`
	Version uint64 `json:"version"`
	Usage   Usage  `json:"usage"`
	// Waiting is how many human gates wait for an answer.
	Waiting int `json:"waiting"`
}

func (s *Server) summary(e *entry) SessionSummary {
	s.mu.Lock()
	sess, info, gone := e.s, e.info, e.gone
	s.mu.Unlock()
	e.t.mu.Lock()
	sum := SessionSummary{ID: e.id, File: info.File, Status: e.t.status, Reason: e.t.reason, Durable: info.Durable,
		Started: e.started.UTC().Format(time.RFC3339), Usage: e.t.usage}
	for _, n := range e.t.nodes {
		if n.question != nil {
			sum.Waiting++
		}
	}
	e.t.mu.Unlock()
	if gone && sum.Status == "running" {
		sum.Status = "stopped"
	}
	if sess != nil && sess.System() != nil {
		sum.Graph = sess.System().Graph().Name
		sum.Version = sess.Version()
	}
	return sum
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	ids := append([]string(nil), s.order...)
	entries := make([]*entry, len(ids))
	for i, id := range ids {
		entries[i] = s.sessions[id]
	}
	s.mu.Unlock()
	out := make([]SessionSummary, 0, len(entries))
	for _, e := range entries {
		out = append(out, s.summary(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// NodeView is a node as the page draws it.
type NodeView struct {
	ID    string `json:"id"`
	Type  string `json:"type"`
	Label string `json:"label"`
	// State is idle, waiting, running, succeeded, failed or stopped.
	State string `json:"state"`
	// Reason says for what a node waits, or why it stopped or failed.
	Reason   string    `json:"reason,omitempty"`
	Runs     int       `json:"runs"`
	Last     string    `json:"last,omitempty"` // the last outcome status
	Usage    Usage     `json:"usage"`
	Manual   bool      `json:"manual,omitempty"`
	Question *Question `json:"question,omitempty"`
}

// BudgetView is one dimension of a budget scope.
type BudgetView struct {
	Scope     string  `json:"scope"`
	Dimension string  `json:"dimension"`
	Limit     float64 `json:"limit"`
	Spent     float64 `json:"spent"`
}

// SessionView is a session as the page draws it.
type SessionView struct {
	SessionSummary
	DOT     string              `json:"dot"`
	Nodes   []NodeView          `json:"nodes"`
	Buffers []actors.BufferStat `json:"buffers"`
	Budgets []BudgetView        `json:"budgets"`
}

func (s *Server) detail(w http.ResponseWriter, r *http.Request, e *entry) {
	v := SessionView{SessionSummary: s.summary(e), Nodes: []NodeView{}, Buffers: []actors.BufferStat{}, Budgets: []BudgetView{}}
	s.mu.Lock()
	sess := e.s
	s.mu.Unlock()
	if sess == nil || sess.System() == nil {
		writeJSON(w, http.StatusOK, v)
		return
	}
	sys := sess.System()
	g := sys.Graph()
	v.DOT = displayDOT(g)
	states := map[string]actors.GateState{}
	for _, st := range sys.Explain("").States {
		states[st.Node] = st
	}
	e.t.mu.Lock()
	for _, n := range g.Nodes {
		tr := e.t.nodes[n.ID]
		if tr == nil {
			tr = &nodeTrack{}
		}
		nv := NodeView{ID: n.ID, Type: g.HandlerType(n), Label: n.Label(), Runs: tr.runs, Last: tr.last, Usage: tr.usage,
			Manual: n.Trigger() == "manual", Question: tr.question}
		nv.State, nv.Reason = displayState(states[n.ID], tr)
		v.Nodes = append(v.Nodes, nv)
	}
	e.t.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	if bs := sys.Buffers(ctx); bs != nil {
		v.Buffers = bs
	}
	cancel()
	for _, b := range sys.Scheduler().Budgets() {
		for _, d := range []BudgetView{
			{Dimension: "time", Limit: b.Limits.Time.Seconds(), Spent: b.Spent.Time.Seconds()},
			{Dimension: "tokens", Limit: float64(b.Limits.Tokens), Spent: float64(b.Spent.Tokens)},
			{Dimension: "cost", Limit: b.Limits.Cost, Spent: b.Spent.Cost},
		} {
			if d.Limit > 0 {
				d.Scope = b.Scope
				v.Budgets = append(v.Budgets, d)
			}
		}
	}
	writeJSON(w, http.StatusOK, v)
}

// displayState maps the scheduler's state and what the events said to the
// page's states.
func displayState(st actors.GateState, tr *nodeTrack) (string, string) {
	switch st.State {
	case "running", "ready":
		if tr.question != nil {
			return "waiting", "waiting for an answer: " + tr.question.Text
		}
		return "running", ""
	case "waiting":
		return "waiting", st.Reason
	case "stopped":
		return "stopped", st.Reason
	}
	if tr.question != nil {
		return "waiting", "waiting for an answer: " + tr.question.Text
	}
	if tr.running {
		return "running", ""
	}
	switch tr.last {
	case "":
		return "idle", ""
	case "fail":
		return "failed", tr.reason
	default:
		return "succeeded", ""
	}
}

// events streams the session's events: the backlog after Last-Event-ID
// (or ?after=), then live ones, until the page leaves.
func (s *Server) events(w http.ResponseWriter, r *http.Request, e *entry) {
	fl, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "streaming unsupported")
		return
	}
	after := r.Header.Get("Last-Event-ID")
	if after == "" {
		after = r.URL.Query().Get("after")
	}
	seq, _ := strconv.ParseUint(after, 10, 64)
	past, ch := e.t.subscribe(seq)
	defer e.t.unsubscribe(ch)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(ev Event) error {
		data, _ := json.Marshal(ev)
		_, err := fmt.Fprintf(w, "id: %d\nevent: event\ndata: %s\n\n", ev.Seq, data)
		return err
	}
	for _, ev := range past {
		if send(ev) != nil {
			return
		}
	}
	fl.Flush()
	keepAlive := time.NewTicker(25 * time.Second)
	defer keepAlive.Stop()
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return // fell behind: the page reconnects
			}
			if send(ev) != nil {
				return
			}
			fl.Flush()
		case <-keepAlive.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			fl.Flush()
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
}

// fileName is a file of a node's stage directory the page may read.
var fileName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// maxFile is how much of a file the page gets.
const maxFile = 512 << 10

// NodeDetail is a node's explanation and files.
type NodeDetail struct {
	Node    string     `json:"node"`
	Explain string     `json:"explain"`
	Files   []FileInfo `json:"files"`
}

// FileInfo is one file of a node's stage directory.
type FileInfo struct {
	Name     string `json:"name"`
	Size     int64  `json:"size"`
	Modified string `json:"modified"`
}

func (s *Server) stageDir(e *entry, node string) (string, bool) {
	s.mu.Lock()
	sess, logs := e.s, e.info.LogsDir
	s.mu.Unlock()
	if sess == nil || sess.System() == nil || sess.System().Graph().Node(node) == nil {
		return "", false
	}
	if logs == "" {
		return "", true
	}
	return filepath.Join(logs, node), true
}

func (s *Server) nodeDetail(w http.ResponseWriter, r *http.Request, e *entry) {
	node := r.PathValue("node")
	dir, ok := s.stageDir(e, node)
	if !ok {
		writeError(w, http.StatusNotFound, "no node "+node)
		return
	}
	s.mu.Lock()
	sess := e.s
	s.mu.Unlock()
	d := NodeDetail{Node: node, Explain: sess.System().Explain(node).Explain, Files: []FileInfo{}}
	if dir != "" {
		ents, _ := os.ReadDir(dir)
		for _, de := range ents {
			if !de.Type().IsRegular() || !fileName.MatchString(de.Name()) {
				continue
			}
			fi, err := de.Info()
			if err != nil {
				continue
			}
			d.Files = append(d.Files, FileInfo{Name: de.Name(), Size: fi.Size(), Modified: fi.ModTime().UTC().Format(time.RFC3339)})
		}
		sort.Slice(d.Files, func(i, j int) bool { return d.Files[i].Name < d.Files[j].Name })
	}
	writeJSON(w, http.StatusOK, d)
}

// file serves one file of a node's stage directory as plain text: a plain
// name only, opened under the directory (no path leaves it), at most
// maxFile bytes.
func (s *Server) file(w http.ResponseWriter, r *http.Request, e *entry) {
	node, name := r.PathValue("node"), r.PathValue("name")
	dir, ok := s.stageDir(e, node)
	if !ok || dir == "" {
		writeError(w, http.StatusNotFound, "no node "+node)
		return
	}
	if !fileName.MatchString(name) {
		writeError(w, http.StatusBadRequest, "not a file name: "+name)
		return
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		writeError(w, http.StatusNotFound, "no file "+name)
		return
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		writeError(w, http.StatusNotFound, "no file "+name)
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		writeError(w, http.StatusNotFound, "no file "+name)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Content-Disposition", "inline")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.Copy(w, io.LimitReader(f, maxFile))
}

func (s *Server) checkpoints(w http.ResponseWriter, r *http.Request, e *entry) {
	s.mu.Lock()
	durable := e.info.Durable
	s.mu.Unlock()
	if !durable {
		writeJSON(w, http.StatusOK, []session.HistoryEntry{})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	h, err := session.History(ctx, s.b, e.id)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	if h == nil {
		h = []session.HistoryEntry{}
	}
	writeJSON(w, http.StatusOK, h)
}

// action reads an action's JSON body (at most 64 KiB).
func action(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad request body: %v", err)
	}
	return nil
}

func (s *Server) running(e *entry) (*session.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.s == nil || e.gone || e.s.System() == nil {
		return nil, errors.New("session " + e.id + " is not running")
	}
	return e.s, nil
}

// answer sends a human gate's answer the way `switchyard answer` does: the
// session checks it against the gate's options.
func (s *Server) answer(w http.ResponseWriter, r *http.Request, e *entry) {
	var a session.AnswerMessage
	if err := action(r, &a); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if a.Node == "" || a.Choice == "" {
		writeError(w, http.StatusBadRequest, "an answer needs node and choice")
		return
	}
	if _, err := s.running(e); err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	if a.By == "" {
		a.By = "web"
	}
	data, _ := json.Marshal(a)
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	msg, err := s.b.Conn().RequestWithContext(ctx, broker.Control(e.id, "answer"), data)
	if err != nil {
		writeError(w, http.StatusBadGateway, "the session did not take the answer: "+err.Error())
		return
	}
	var rep session.AnswerReply
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		writeError(w, http.StatusBadGateway, "bad reply from the session")
		return
	}
	code := http.StatusOK
	if !rep.OK {
		code = http.StatusUnprocessableEntity
	}
	writeJSON(w, code, rep)
}

// trigger fires a node now with what it holds (switchyard trigger; a
// message is added when given).
func (s *Server) trigger(w http.ResponseWriter, r *http.Request, e *entry) {
	var req actors.TriggerRequest
	if err := action(r, &req); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	sess, err := s.running(e)
	if err != nil {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	if sess.System().Graph().Node(req.Node) == nil {
		writeError(w, http.StatusNotFound, "no node "+req.Node)
		return
	}
	data, _ := json.Marshal(req)
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	msg, err := s.b.Conn().RequestWithContext(ctx, broker.Control(e.id, "trigger"), data)
	if err != nil {
		writeError(w, http.StatusBadGateway, "the session did not take the trigger: "+err.Error())
		return
	}
	var rep map[string]string
	if err := json.Unmarshal(msg.Data, &rep); err != nil {
		writeError(w, http.StatusBadGateway, "bad reply from the session")
		return
	}
	code := http.StatusOK
	if rep["error"] != "" {
		code = http.StatusConflict
	}
	writeJSON(w, code, rep)
}
