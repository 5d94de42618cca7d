package cond_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard/switchyard/edges/cond"
)

func TestEval(t *testing.T) {
	env := cond.Env{Outcome: "success", PreferredLabel: "Approve",
		Context: map[string]string{"tests_passed": "true", "context.flag": "full", "count": "0", "name": "a b"}}
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"", true},
		{"   ", true},
		{"outcome=success", true},
		{"outcome=SUCCESS", true}, // statuses compare case-insensitively
		{"outcome=fail", false},
		{"outcome!=success", false},
		{"outcome!=fail", true},
		{"outcome=PASS", false}, // no synonyms in conditions
		{"preferred_label=Approve", true},
		{"preferred_label=approve", false}, // labels compare exactly
		{"context.tests_passed=true", true},
		{"context.tests_passed=true && outcome=success", true},
		{"context.tests_passed=true && outcome=fail", false},
		{"context.missing=", true}, // a missing key is ""
		{`context.missing=""`, true},
		{"context.missing!=x", true},
		{"context.flag=full", true}, // full key first
		{"tests_passed", true},      // bare key: truthy
		{"count", false},
		{"missing", false},
		{`context.name="a b"`, true},
		{`context.name = "a b"`, true},
		{` outcome = success `, true},
	} {
		t.Run(tc.src, func(t *testing.T) {
			e, err := cond.Parse(tc.src)
			require.NoError(t, err)
			require.Equal(t, tc.want, e.Eval(env))
		})
	}
}

func TestSyntaxErrors(t *testing.T) {
	for _, tc := range []struct {
		src    string
		offset int
		msg    string
	}{
		{"outcome=success &&", 18, "empty clause"},
		{"&& outcome=success", 0, "empty clause"},
		{"a=1 && && b=2", 6, "empty clause"},
		{"outcome==success", 7, "unsupported operator =="},
		{"a=1 || b=2", 4, "unsupported operator ||"},
		{"=success", 0, "missing key"},
		{"!outcome", 0, "negation"},
		{"out come=x", 3, "invalid character"},
		{`context.x="abc`, 10, "unterminated quoted value"},
		{`context.x="a\qb"`, 12, "unknown escape"},
		{"context.=x", 0, "incomplete key"},
		{`a="x" y`, 5, "unexpected text"},
	} {
		t.Run(tc.src, func(t *testing.T) {
			_, err := cond.Parse(tc.src)
			var se *cond.SyntaxError
			require.ErrorAs(t, err, &se)
			require.Equal(t, tc.offset, se.Offset)
			require.Contains(t, se.Msg, tc.msg)
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"outcome=success", "a!=b && c", `x="q\"z"`, "&&", "a==b", "context.x.y=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := cond.Parse(src)
		if err != nil {
			var se *cond.SyntaxError
			require.ErrorAs(t, err, &se)
			require.True(t, se.Offset >= 0 && se.Offset <= len(src), "offset %d outside %q", se.Offset, src)
			return
		}
		e.Eval(cond.Env{Context: map[string]string{}})
	})
}
