package cond_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/edges/cond"
)

var env = cond.Env{Outcome: "success", PreferredLabel: "Approve", Context: map[string]string{
	"tests_passed": "true", "context.flag": "full", "flag": "short", "count": "0", "off": "false",
	"name": "a b", "q": `say "hi"`, "slash": `a\b`, "op": "a&&b", "eq": "x==y", "Case": "Upper",
	"path.deep.key": "v", "loop_state": "running",
}}

func TestEval(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want bool
	}{
		// the empty condition
		{"", true},
		{"   ", true},
		// outcome: compared case-insensitively, no synonyms
		{"outcome=success", true},
		{"outcome=SUCCESS", true},
		{"outcome=Success", true},
		{"outcome=fail", false},
		{"outcome!=success", false},
		{"outcome!=SUCCESS", false},
		{"outcome!=fail", true},
		{"outcome=PASS", false},
		{"outcome", true}, // bare: truthy
		// preferred_label: exact
		{"preferred_label=Approve", true},
		{"preferred_label=approve", false},
		{"preferred_label!=Reject", true},
		// context.<path>: the full key first, then the path
		{"context.tests_passed=true", true},
		{"context.tests_passed=True", false}, // values are case-sensitive
		{"context.flag=full", true},
		{"context.path.deep.key=v", true},
		{"context.loop_state!=exhausted", true},
		{"context.missing=", true}, // a missing key is ""
		{`context.missing=""`, true},
		{"context.missing!=x", true},
		{"context.missing=x", false},
		// other bare keys read the context
		{"flag=short", true},
		{"Case=Upper", true},
		{"case=Upper", false}, // keys are case-sensitive
		{"tests_passed", true},
		{"context.tests_passed", true},
		{"count", false}, // "0" is false
		{"off", false},   // "false" is false
		{"missing", false},
		{"name", true},
		// && joins clauses
		{"context.tests_passed=true && outcome=success", true},
		{"context.tests_passed=true && outcome=fail", false},
		{"outcome=fail && context.tests_passed=true", false},
		{"outcome=success&&flag=short&&tests_passed", true},
		// quoted and bare values
		{`context.name="a b"`, true},
		{`context.name = "a b"`, true},
		{"context.name=a b", true}, // a bare value is trimmed, inner spaces kept
		{` outcome = success `, true},
		{"\toutcome=success\n", true},
		{`q="say \"hi\""`, true},
		{`slash="a\\b"`, true},
		{`slash="a\b"`, true}, // a backslash before anything else is kept
		{`op="a&&b"`, true},
		{`op="a&&b" && outcome=success`, true},
		{`eq="x==y"`, true},
		{`context.q!="say"`, true},
		{`preferred_label="Approve"`, true},
		{`outcome="SUCCESS"`, true},
		{`name=""`, false},
		{"context.x=hello!", false}, // ! inside a bare value is text
	} {
		t.Run(tc.src, func(t *testing.T) {
			e, err := cond.Parse(tc.src)
			require.NoError(t, err)
			require.Equal(t, tc.want, e.Eval(env))
			if e != nil {
				require.Equal(t, tc.src, e.String(), "String returns the source")
			}
		})
	}
}

func TestEvalNilAndEmptyEnv(t *testing.T) {
	var e *cond.Expr
	require.True(t, e.Eval(cond.Env{}), "a nil Expr is the empty condition")
	require.Empty(t, e.String())
	e, err := cond.Parse("context.x= && outcome=")
	require.NoError(t, err)
	require.True(t, e.Eval(cond.Env{}), "with a nil context every key is missing, so \"\"")
}

func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		src    string
		offset int
		msg    string
	}{
		{"outcome=success &&", 18, "empty clause"},
		{"outcome=success && ", 18, "empty clause"},
		{"&& outcome=success", 0, "empty clause"},
		{"a=1 && && b=2", 6, "empty clause"},
		{"a=1 &&&& b=2", 6, "empty clause"},
		{"outcome==success", 7, "unsupported operator =="},
		{"outcome == success", 8, "unsupported operator =="},
		{"a=1 || b=2", 4, "unsupported operator ||"},
		{"a || b", 2, "unsupported operator ||"},
		{"|| b", 0, "unsupported operator ||"},
		{"=success", 0, "missing key"},
		{"  != x", 2, "missing key"},
		{"a=1 && =x", 7, "missing key"},
		{"!outcome", 0, "negation"},
		{"outcome !", 8, "dangling !"},
		{"outcome ! = x", 8, "dangling !"},
		{"out come=x", 3, "contains a space"},
		{"context.my key=1", 10, "contains a space"},
		{"context.=x", 8, "empty key segment"},
		{"context", -1, ""}, // a plain context key
		{".x=1", 0, "empty key segment"},
		{"a..b=1", 2, "empty key segment"},
		{"a.=1", 2, "empty key segment"},
		{`context.x="abc`, 10, "unterminated quoted value"},
		{`context.x="ab\"`, 10, "unterminated quoted value"},
		{`a="x" y`, 6, "unexpected text after a quoted value"},
		{`a="x" || b`, 6, "unexpected text"},
		{`a=x"y"`, 3, `unexpected "`},
		{"a=b=c", 3, "unexpected ="},
		{"a=b || c", 4, "unsupported operator ||"},
		{"a & b", 2, "unexpected character"},
		{"(a=1)", 0, "unexpected character"},
		{"a<1", 1, "unexpected character"},
		{"é=1", 0, "unexpected character"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			_, err := cond.Parse(tc.src)
			if tc.offset < 0 {
				require.NoError(t, err)
				return
			}
			var se *cond.SyntaxError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.offset, se.Offset)
			require.Contains(t, se.Msg, tc.msg)
			require.Equal(t, se.Msg, err.Error())
		})
	}
}

func TestEvalDoesNotAllocate(t *testing.T) {
	e, err := cond.Parse(`outcome=SUCCESS && context.flag=full && tests_passed && preferred_label!="x"`)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if !e.Eval(env) {
			t.Fatal("condition does not hold")
		}
	})
	require.Zero(t, allocs)
}

func BenchmarkEval(b *testing.B) {
	e, err := cond.Parse("outcome=success && context.tests_passed=true")
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		e.Eval(env)
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := cond.Parse(`outcome=success && context.name="a b"`); err != nil {
			b.Fatal(err)
		}
	}
}

// FuzzParse checks that Parse never panics, that errors point inside the
// source, and that a compiled condition evaluates the same after a round
// trip through String.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"", "outcome=success", "a!=b && c", `x="q\"z"`, `x="a&&b" && y`, "&&", "a==b", "a||b",
		"context.x.y=1", "!a", "a !", `a="unterminated`, "context.=1", "out come=1", `a="x" y`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := cond.Parse(src)
		if err != nil {
			var se *cond.SyntaxError
			require.ErrorAs(t, err, &se)
			require.True(t, se.Offset >= 0 && se.Offset <= len(src), "offset %d outside %q", se.Offset, src)
			require.NotEmpty(t, se.Msg)
			return
		}
		if strings.TrimSpace(src) == "" {
			require.Nil(t, e)
		}
		again, err := cond.Parse(e.String())
		require.NoError(t, err)
		for _, en := range []cond.Env{{}, env, {Outcome: "FAIL", Context: map[string]string{"a": "1", "x": "0"}}} {
			require.Equal(t, e.Eval(en), again.Eval(en))
		}
	})
}
