package main

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/switchyard/switchyard/broker"
	"github.com/switchyard/switchyard/observe"
	"github.com/switchyard/switchyard/session"
	"github.com/switchyard/switchyard/web"
)

// webFlags are the flags of the HTTP listener (the web view and /metrics).
type webFlags struct {
	addr             string
	insecureLoopback bool
}

func (w *webFlags) add(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&w.addr, "http", "", "serve the web view and /metrics on HOST:PORT (off by default)")
	fl.BoolVar(&w.insecureLoopback, "http-insecure-loopback", false, "serve --http without credentials (only on a loopback address)")
}

// check refuses an HTTP listener without a credential, unless it is on
// loopback with --http-insecure-loopback.
func (w *webFlags) check(creds webCreds) error {
	if w.addr == "" {
		if w.insecureLoopback {
			return usageErr(errors.New("--http-insecure-loopback goes with --http"))
		}
		return nil
	}
	switch {
	case w.insecureLoopback && !isLoopback(w.addr):
		return usageErr(fmt.Errorf("--http-insecure-loopback: %s is not a loopback address", w.addr))
	case !w.insecureLoopback && creds.none():
		return usageErr(errors.New("--http needs a credential (--token, --admin-token, or --user and --password; env SWITCHYARD_TOKEN...), or --http-insecure-loopback on a loopback address"))
	}
	return nil
}

// webCreds are the credentials the HTTP listener accepts: the NATS
// listener's. The admin token may act (answer gates, trigger nodes); the
// token, or the user and password, may look.
type webCreds struct {
	token, admin, user, password string
}

func (c webCreds) none() bool { return c.token == "" && c.admin == "" && c.user == "" }

// isLoopback reports whether a listen address's host is a loopback one.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// observers are a command's metrics, traces and web view: all off unless
// asked for (--http, the OTEL_* variables), then each session is
// instrumented and served.
type observers struct {
	tel    *observe.Telemetry
	tp     *sdktrace.TracerProvider
	web    *webServer
	stderr io.Writer

	mu   sync.Mutex
	cfgs map[string]web.Info // what instrument saw of each session
}

// startObservers starts what the flags and the environment ask for.
func startObservers(ctx context.Context, wf *webFlags, creds webCreds, b *broker.Broker, defProvider string, stderr io.Writer) (*observers, error) {
	o := &observers{stderr: stderr, cfgs: map[string]web.Info{}}
	if err := wf.check(creds); err != nil {
		return nil, err
	}
	tp, err := startTracing(ctx)
	if err != nil {
		return nil, usageErr(err)
	}
	o.tp = tp
	if wf.addr == "" && tp == nil {
		return o, nil
	}
	opts := observe.Options{DefaultProvider: defProvider, ProcessMetrics: true}
	if tp != nil {
		opts.Tracer = tp
	}
	o.tel = observe.New(opts)
	if wf.addr != "" {
		w, err := newWebServer(wf.addr, creds, wf.insecureLoopback, o.tel, b)
		if err != nil {
			o.close()
			return nil, &exitError{code: 1, err: err}
		}
		o.web = w
		fmt.Fprintf(stderr, "web view on %s\n", w.url())
	}
	return o, nil
}

// instrument adds the metrics and traces hooks to a session's config.
func (o *observers) instrument(cfg *session.Config) {
	if o == nil || o.tel == nil {
		return
	}
	o.tel.Instrument(cfg)
	if o.web != nil {
		o.web.view.Observe(cfg)
		o.mu.Lock()
		o.cfgs[cfg.ID] = web.Info{LogsDir: cfg.LogsDir, Durable: cfg.Durable}
		o.mu.Unlock()
	}
}

// answersOnPage reports whether people answer human gates on the web page
// (--http): then the session takes answers on its control subject.
func (o *observers) answersOnPage() bool { return o != nil && o.web != nil }

// add makes a started session visible to scrapes and the web view; the
// returned func forgets it (call it when the session is stopped).
func (o *observers) add(s *session.Session, file string) func() {
	if o == nil || o.tel == nil {
		return func() {}
	}
	untrack := o.tel.Track(s)
	if o.web == nil {
		return untrack
	}
	o.mu.Lock()
	info := o.cfgs[s.ID()]
	o.mu.Unlock()
	info.File = file
	forget := o.web.view.Add(s, info)
	return func() { untrack(); forget() }
}

// close stops the web server and flushes the spans.
func (o *observers) close() {
	if o == nil {
		return
	}
	if o.web != nil {
		o.web.close()
	}
	if o.tp != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := o.tp.Shutdown(ctx); err != nil {
			fmt.Fprintf(o.stderr, "traces: %v\n", err)
		}
		cancel()
	}
}

// webServer is the HTTP listener.
type webServer struct {
	view  *web.Server
	creds webCreds
	open  bool // --http-insecure-loopback
	tel   *observe.Telemetry
	b     *broker.Broker
	ln    net.Listener
	srv   *http.Server
	done  chan struct{}
}

func newWebServer(addr string, creds webCreds, open bool, tel *observe.Telemetry, b *broker.Broker) (*webServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	w := &webServer{view: web.New(b), creds: creds, open: open, tel: tel, b: b, ln: ln, done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", tel.Handler())
	mux.Handle("/", w.view.Handler())
	w.srv = &http.Server{Handler: w.authenticate(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { // owned by the server: ends when close shuts it down
		defer close(w.done)
		_ = w.srv.Serve(ln)
	}()
	return w, nil
}

func (w *webServer) url() string { return "http://" + w.ln.Addr().String() + "/" }

func (w *webServer) close() {
	w.view.Close() // ends the pages' event streams
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := w.srv.Shutdown(ctx); err != nil {
		_ = w.srv.Close()
	}
	<-w.done
}

// Roles of an HTTP request.
const (
	roleNone = iota
	roleViewer
	roleAdmin
)

// tokenCookie holds a token given once in the URL (?token=...).
const tokenCookie = "switchyard_token"

// role is what the request's credential allows: a bearer token (header,
// cookie or ?token=), or HTTP basic user and password.
func (w *webServer) role(r *http.Request) int {
	if w.open {
		return roleAdmin
	}
	eq := func(configured, presented string) bool {
		return configured != "" && subtle.ConstantTimeCompare([]byte(configured), []byte(presented)) == 1
	}
	var presented []string
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		presented = append(presented, strings.TrimPrefix(h, "Bearer "))
	}
	if c, err := r.Cookie(tokenCookie); err == nil {
		presented = append(presented, c.Value)
	}
	if t := r.URL.Query().Get("token"); t != "" {
		presented = append(presented, t)
	}
	best := roleNone
	for _, p := range presented {
		switch {
		case eq(w.creds.admin, p):
			return roleAdmin
		case eq(w.creds.token, p):
			best = roleViewer
		}
	}
	if u, p, ok := r.BasicAuth(); ok && w.creds.user != "" && u == w.creds.user && eq(w.creds.password, p) {
		best = roleViewer
	}
	return best
}

type roleKey struct{}

// authenticate refuses requests without a credential (unless the listener
// is open on loopback, where it refuses Host names that are not loopback:
// DNS rebinding). A token given in the URL of a page is kept in a cookie.
func (w *webServer) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if w.open && !isLoopbackHost(r.Host) {
			http.Error(rw, "this listener only answers loopback host names", http.StatusForbidden)
			return
		}
		role := w.role(r)
		if role == roleNone {
			rw.Header().Set("WWW-Authenticate", `Bearer realm="switchyard"`)
			http.Error(rw, "a credential is needed: the token of the NATS listener (Authorization: Bearer, or ?token= once)", http.StatusUnauthorized)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && !w.open && r.Method == http.MethodGet {
			http.SetCookie(rw, &http.Cookie{Name: tokenCookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			if !strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/metrics" {
				// Keep the token out of the address bar and the history.
				q := r.URL.Query()
				q.Del("token")
				u := *r.URL
				u.RawQuery = q.Encode()
				http.Redirect(rw, r, u.RequestURI(), http.StatusSeeOther)
				return
			}
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			// Actions: the admin credential, and a header a cross-site form
			// cannot send.
			if role != roleAdmin {
				http.Error(rw, "acting on a session (answering a gate, triggering a node) needs the admin token, as on the NATS listener", http.StatusForbidden)
				return
			}
			if r.Header.Get("X-Switchyard") == "" {
				http.Error(rw, "missing X-Switchyard header", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(rw, r.WithContext(context.WithValue(r.Context(), roleKey{}, role)))
	})
}

// isLoopbackHost reports whether a Host header names a loopback address.
func isLoopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
