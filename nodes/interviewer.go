package nodes

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/switchyard/switchyard/edges"
)

// QuestionType is the kind of answer a question wants.
type QuestionType string

// Question types (spec section 6).
const (
	SingleSelect QuestionType = "single_select"
	MultiSelect  QuestionType = "multi_select"
	FreeText     QuestionType = "free_text"
	Confirm      QuestionType = "confirm"
)

// Option is one choice of a question.
type Option struct {
	Key    string // accelerator key
	Label  string // the edge label (or target id)
	Target string // the node the choice leads to
}

// Question is what a human gate asks.
type Question struct {
	ID      string
	Stage   string // the node id
	Text    string
	Type    QuestionType
	Options []Option
	Default string
	Timeout time.Duration
}

// Special answer values.
const (
	AnswerYes     = "YES"
	AnswerNo      = "NO"
	AnswerSkipped = "SKIPPED"
	AnswerTimeout = "TIMEOUT"
)

// Answer is a person's reply.
type Answer struct {
	// Value is an option key, label or target, YES/NO, SKIPPED or TIMEOUT.
	Value    string
	Selected []Option
	Text     string
	By       string
	At       time.Time
}

// Interviewer asks people. Ask blocks until an answer, the question's
// timeout (answer TIMEOUT) or ctx; implementations are safe for concurrent
// use by several gates.
type Interviewer interface {
	Ask(ctx context.Context, q *Question) (*Answer, error)
}

// AutoApprove answers YES, or the first option.
type AutoApprove struct{}

// Ask answers at once.
func (AutoApprove) Ask(_ context.Context, q *Question) (*Answer, error) {
	if len(q.Options) > 0 && q.Type != Confirm {
		return &Answer{Value: q.Options[0].Key, Selected: q.Options[:1], By: "auto-approve", At: time.Now()}, nil
	}
	return &Answer{Value: AnswerYes, By: "auto-approve", At: time.Now()}, nil
}

// Queue answers from pre-set answers per stage (node id), in order; a stage
// with no answer left is SKIPPED. It backs `switchyard run --answer`.
type Queue struct {
	mu      sync.Mutex
	answers map[string][]string
}

// NewQueue returns a queue of answers per node.
func NewQueue(answers map[string][]string) *Queue {
	q := &Queue{answers: map[string][]string{}}
	for k, v := range answers {
		q.answers[k] = append([]string(nil), v...)
	}
	return q
}

// Ask takes the stage's next answer.
func (q *Queue) Ask(_ context.Context, qu *Question) (*Answer, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	list := q.answers[qu.Stage]
	if len(list) == 0 {
		return &Answer{Value: AnswerSkipped, At: time.Now()}, nil
	}
	q.answers[qu.Stage] = list[1:]
	return &Answer{Value: list[0], Text: list[0], By: "queue", At: time.Now()}, nil
}

// Remaining returns the answers not taken yet, per stage.
func (q *Queue) Remaining() map[string][]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := map[string][]string{}
	for k, v := range q.answers {
		if len(v) > 0 {
			out[k] = append([]string(nil), v...)
		}
	}
	return out
}

// Callback answers through a function.
type Callback func(ctx context.Context, q *Question) (*Answer, error)

// Ask calls f.
func (f Callback) Ask(ctx context.Context, q *Question) (*Answer, error) { return f(ctx, q) }

// Recording remembers every question and answer of an inner interviewer.
type Recording struct {
	Inner Interviewer
	mu    sync.Mutex
	log   []Exchange
}

// NewRecording records the exchanges of inner.
func NewRecording(inner Interviewer) *Recording { return &Recording{Inner: inner} }

// Exchange is one recorded question and answer.
type Exchange struct {
	Question Question
	Answer   *Answer
}

// Ask asks Inner and records the exchange.
func (r *Recording) Ask(ctx context.Context, q *Question) (*Answer, error) {
	a, err := r.Inner.Ask(ctx, q)
	r.mu.Lock()
	r.log = append(r.log, Exchange{Question: *q, Answer: a})
	r.mu.Unlock()
	return a, err
}

// Exchanges returns what was asked and answered so far.
func (r *Recording) Exchanges() []Exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Exchange(nil), r.log...)
}

// Console asks on a terminal: it prints the question with its keys to w
// and reads one line from r per question. Ask returns when a line arrives
// or ctx ends (the human gate turns its timeout into ctx's end); a line
// still being read then answers the next question, so no reader goroutine
// is left behind per question. Closing r ends the last read.
func Console(r io.Reader, w io.Writer) Interviewer {
	return &console{in: bufio.NewReader(r), w: w}
}

type console struct {
	mu      sync.Mutex
	in      *bufio.Reader
	w       io.Writer
	pending chan consoleLine // a read an earlier Ask left running
}

type consoleLine struct {
	s   string
	err error
}

// read returns the channel of the next line, starting a read unless one is
// pending.
func (c *console) read() chan consoleLine {
	if ch := c.pending; ch != nil {
		c.pending = nil
		return ch
	}
	ch := make(chan consoleLine, 1)
	go func() { // ends when the reader returns a line or fails
		s, err := c.in.ReadString('\n')
		ch <- consoleLine{s, err}
	}()
	return ch
}

func (c *console) Ask(ctx context.Context, q *Question) (*Answer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	fmt.Fprintf(c.w, "\n[%s] %s\n", q.Stage, q.Text)
	for _, o := range q.Options {
		label := o.Label
		if k, rest := edges.Accelerator(label); k == o.Key && rest != "" {
			label = rest
		}
		fmt.Fprintf(c.w, "  [%s] %s\n", o.Key, label)
	}
	if q.Default != "" {
		fmt.Fprintf(c.w, "(default %s", q.Default)
		if q.Timeout > 0 {
			fmt.Fprintf(c.w, " after %s", q.Timeout)
		}
		fmt.Fprint(c.w, ")\n")
	}
	switch q.Type {
	case Confirm:
		fmt.Fprint(c.w, "(y/n) > ")
	case MultiSelect:
		fmt.Fprint(c.w, "keys, comma-separated > ")
	case FreeText:
		fmt.Fprint(c.w, "answer > ")
	default:
		fmt.Fprint(c.w, "> ")
	}
	ch := c.read()
	select {
	case l := <-ch:
		s := strings.TrimSpace(l.s)
		if l.err != nil && s == "" {
			return &Answer{Value: AnswerSkipped, By: "console", At: time.Now()}, nil
		}
		if q.Type == Confirm {
			switch strings.ToLower(s) {
			case "y", "yes":
				s = AnswerYes
			case "n", "no":
				s = AnswerNo
			}
		}
		return &Answer{Value: s, Text: s, By: "console", At: time.Now()}, nil
	case <-ctx.Done():
		c.pending = ch
		fmt.Fprintln(c.w)
		return nil, ctx.Err()
	}
}
