package main

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// chromiumPath finds Debian's chromium. Without it the browser tests skip,
// unless CI=true (.ci/run installs it): then they fail.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: the browser tests need it (apt-get install -y chromium, as .ci/run does)")
	}
	t.Skip("no chromium on PATH: the browser tests are skipped (apt-get install -y chromium runs them; CI=true makes this a failure)")
	return ""
}

// browser starts a headless chromium for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // tests may run as root
		chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1440, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx) // closes the browser and waits for it
		cancelCtx()
		cancelAlloc()
	})
	require.NoError(t, chromedp.Run(ctx), "chromium starts")
	return ctx
}

// step runs browser actions with a deadline.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Run(sctx, actions...), what)
}

const gatedPipeline = `digraph release {
	graph [goal="Ship the release notes"]
	start   [shape=Mdiamond]
	draft   [prompt="Draft the release notes for: $goal"]
	review  [shape=hexagon, label="Publish this draft?"]
	confirm [shape=hexagon, label="Really publish?"]
	exit    [shape=Msquare, label="<img src=x onerror=alert(1)> \"done\" \\N"]
	start -> draft -> review
	review -> confirm [label="[A] Approve"]
	review -> draft   [label="[R] Revise"]
	confirm -> exit   [label="[Y] Yes"]
}`

// A run with two human gates, watched and answered in a real browser: the
// page draws the graph, shows the gate waiting, takes the answer by a
// click, shows the states change, the node's files and the checkpoints,
// and the run finishes.
func TestWebViewAnswersAGateInABrowser(t *testing.T) {
	ctx := browser(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "release.dot")
	require.NoError(t, os.WriteFile(file, []byte(gatedPipeline), 0o644))
	httpAddr := freeAddr(t)
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- execute([]string{"run", file, "--id", "rel1", "--http", httpAddr, "--admin-token", "adm", "--token", "look",
			"--data", filepath.Join(dir, "data"), "--logs", filepath.Join(dir, "logs")}, &stdout, &stderr)
	}()
	waitLog(t, &stderr, "web view on http://"+httpAddr, 20*time.Second)
	page := "http://" + httpAddr

	var explain, fileText, events string
	var svgNodes int
	step(t, ctx, "the page opens", chromedp.Navigate(page+"/?token=adm"), chromedp.WaitVisible(`tr[data-node="review"]`))
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err := chromedp.Run(wctx, chromedp.WaitVisible(`tr[data-node="review"][data-state="waiting"]`))
	cancel()
	if err != nil {
		var table string
		step(t, ctx, "read the table", chromedp.Text(`#nodes`, &table))
		t.Fatalf("the gate is not waiting on the page: %v\n%s\nrun said:\n%s", err, table, stderr.String())
	}
	step(t, ctx, "the page shows the first gate waiting",
		chromedp.WaitVisible(`tr[data-node="review"][data-state="waiting"]`),
		chromedp.WaitVisible(`tr[data-node="draft"][data-state="succeeded"]`),
		chromedp.WaitVisible(`tr[data-node="confirm"][data-state="idle"]`),
		// The graph is laid out in the browser (Graphviz in WebAssembly).
		chromedp.WaitVisible(`#graph svg g#node_review.state-waiting`),
		chromedp.Evaluate(`document.querySelectorAll("#graph svg g.node").length`, &svgNodes),
		chromedp.WaitVisible(`#gates [data-gate="review"]`),
	)
	require.Equal(t, 5, svgNodes, "every node is drawn")
	var exitLabel string
	var imgs int
	step(t, ctx, "a label is text, never markup or DOT",
		chromedp.Evaluate(`document.querySelector("#graph svg g#node_exit text").textContent`, &exitLabel),
		chromedp.Evaluate(`document.querySelectorAll("#graph img").length`, &imgs))
	require.Equal(t, `<img src=x onerror=alert(1)> "done" \N`, exitLabel)
	require.Zero(t, imgs)
	var url string
	step(t, ctx, "the token left the address bar", chromedp.Location(&url))
	require.NotContains(t, url, "adm")

	// The screenshot a person would see: checked below and kept for a look.
	var shot []byte
	step(t, ctx, "screenshot", chromedp.CaptureScreenshot(&shot))
	checkLegible(t, ctx, shot)

	step(t, ctx, "answer the first gate by clicking Approve",
		chromedp.Click(`button[data-answer-node="review"][data-choice="A"]`),
		chromedp.WaitVisible(`tr[data-node="review"][data-state="succeeded"]`),
		chromedp.WaitVisible(`tr[data-node="confirm"][data-state="waiting"]`),
		chromedp.WaitVisible(`#graph svg g#node_confirm.state-waiting`),
		chromedp.WaitVisible(`#graph svg g#node_review.state-succeeded`),
	)
	step(t, ctx, "the event log is live and filterable",
		chromedp.WaitVisible(`#events li[data-kind="human.answer"]`),
		chromedp.SendKeys(`#filter`, "confirm"),
		chromedp.WaitNotVisible(`#events li[data-kind="session.started"]`),
		chromedp.Text(`#events`, &events),
	)
	require.Contains(t, events, "human.question")
	step(t, ctx, "a node's explanation and files",
		chromedp.Click(`tr[data-node="draft"]`),
		chromedp.WaitVisible(`#node-panel [data-explain="draft"]`),
		chromedp.Text(`#node-panel [data-explain="draft"]`, &explain),
		chromedp.Click(`#node-panel button[data-file="prompt.md"]`),
		chromedp.WaitVisible(`#node-panel pre[data-file-content]`),
		chromedp.Text(`#node-panel pre[data-file-content]`, &fileText),
		chromedp.WaitVisible(`#checkpoints tr[data-checkpoint]`),
	)
	require.Contains(t, explain, "draft")
	require.Contains(t, fileText, "Draft the release notes for: Ship the release notes")

	step(t, ctx, "answer the second gate", chromedp.Click(`button[data-answer-node="confirm"][data-choice="Y"]`))
	select {
	case code := <-done:
		require.Equal(t, 0, code, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("the run did not finish after both answers:\n%s", stderr.String())
	}
	require.Contains(t, stderr.String(), "session rel1: success")
}

// checkLegible judges a screenshot of the page: its size, a graph that was
// drawn in colour, text at a readable size, nothing wider than the window.
// With SWITCHYARD_SCREENSHOTS=DIR it is kept there for a person to look at.
func checkLegible(t *testing.T, ctx context.Context, shot []byte) {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(shot))
	require.NoError(t, err, "the screenshot is a PNG")
	b := img.Bounds()
	require.GreaterOrEqual(t, b.Dx(), 1200)
	require.GreaterOrEqual(t, b.Dy(), 800)
	if dir := os.Getenv("SWITCHYARD_SCREENSHOTS"); dir != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, t.Name()+".png"), shot, 0o644))
	}
	// The waiting gate's colour is in the picture (the graph and the table
	// are drawn, not blank).
	require.Greater(t, countColour(img, 0xfd, 0xe6, 0x8a), 200, "the waiting colour shows")
	require.Greater(t, countColour(img, 0xbb, 0xf7, 0xd0), 200, "the succeeded colour shows")

	var fontPx, overflow float64
	var graphWidth, labelPx float64
	var gateText string
	step(t, ctx, "measure the page",
		chromedp.Evaluate(`parseFloat(getComputedStyle(document.querySelector("#nodes td")).fontSize)`, &fontPx),
		chromedp.Evaluate(`document.documentElement.scrollWidth - window.innerWidth`, &overflow),
		chromedp.Evaluate(`document.querySelector("#graph svg").getBoundingClientRect().width`, &graphWidth),
		chromedp.Text(`#gates [data-gate="review"] .q`, &gateText),
		chromedp.Evaluate(`document.querySelector("#graph svg g#node_draft text").getBoundingClientRect().height`, &labelPx),
	)
	require.GreaterOrEqual(t, labelPx, 9.0, "the graph's labels stay readable")
	require.GreaterOrEqual(t, fontPx, 12.0, "table text is at least 12px")
	require.LessOrEqual(t, overflow, 0.0, "nothing is wider than the window")
	require.Greater(t, graphWidth, 150.0, "the graph has room")
	require.True(t, strings.Contains(gateText, "Publish this draft?"), gateText)
}

// countColour counts the pixels of one colour (within a small tolerance).
func countColour(img image.Image, r, g, b uint8) int {
	n := 0
	bd := img.Bounds()
	near := func(a uint32, want uint8) bool {
		d := int(a>>8) - int(want)
		return d >= -6 && d <= 6
	}
	for y := bd.Min.Y; y < bd.Max.Y; y += 2 {
		for x := bd.Min.X; x < bd.Max.X; x += 2 {
			pr, pg, pb, _ := img.At(x, y).RGBA()
			if near(pr, r) && near(pg, g) && near(pb, b) {
				n++
			}
		}
	}
	return n
}

// A served session's manual node is triggered from the page.
func TestWebViewTriggersAManualNode(t *testing.T) {
	ctx := browser(t)
	web, natsURL, _ := serveHTTP(t, `digraph g { src [prompt="collect"]; m [prompt="report", trigger=manual]; src -> m }`)
	code, _, errOut := cli(t, "pub", "w1", "src", "a finding", "--nats", natsURL, "--token", "out")
	require.Equal(t, 0, code, errOut)
	var runs, table string
	step(t, ctx, "the page opens", chromedp.Navigate(web+"/?token=adm"), chromedp.WaitVisible(`tr[data-node="m"]`))
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	err := chromedp.Run(sctx, chromedp.WaitVisible(`tr[data-node="m"][data-state="waiting"]`))
	cancel()
	if err != nil {
		step(t, ctx, "read the table", chromedp.Text(`#nodes`, &table))
		t.Fatalf("m is not waiting: %v\n%s", err, table)
	}
	// The table is updated in place: the button a person is about to click
	// is the same element after a refresh (a replaced one loses the click).
	var marked bool
	step(t, ctx, "mark the Trigger button",
		chromedp.Evaluate(`document.querySelector('tr[data-node="m"] button[data-trigger-node="m"]').dataset.mark = "kept"`, nil))
	code, _, errOut = cli(t, "pub", "w1", "src", "another finding", "--nats", natsURL, "--token", "out")
	require.Equal(t, 0, code, errOut)
	step(t, ctx, "the page shows src's second run", chromedp.WaitVisible(`tr[data-node="src"][data-runs="2"]`),
		chromedp.Evaluate(`document.querySelector('tr[data-node="m"] button[data-mark="kept"]') !== null`, &marked))
	require.True(t, marked, "the Trigger button was replaced by a refresh")
	step(t, ctx, "click Trigger", chromedp.Click(`tr[data-node="m"] button[data-trigger-node="m"]`))
	sctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	// A manual node waits for its next trigger again once it ran.
	err = chromedp.Run(sctx, chromedp.WaitVisible(`tr[data-node="m"][data-last="success"][data-state="waiting"]`))
	cancel()
	var conn string
	step(t, ctx, "read the table", chromedp.Text(`#nodes`, &table), chromedp.Text(`#conn`, &conn), chromedp.Text(`tr[data-node="m"] td.num`, &runs))
	require.NoError(t, err, "m did not succeed: %s\n%s", conn, table)
	require.Equal(t, "1", runs)
}
