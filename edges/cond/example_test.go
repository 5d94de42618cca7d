package cond_test

import (
	"errors"
	"fmt"

	"github.com/switchyard/switchyard/edges/cond"
)

func ExampleParse() {
	e, err := cond.Parse(`outcome=success && context.ticket="SY-42"`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.Eval(cond.Env{Outcome: "SUCCESS", Context: map[string]string{"ticket": "SY-42"}}))
	fmt.Println(e.Eval(cond.Env{Outcome: "fail", Context: map[string]string{"ticket": "SY-42"}}))

	_, err = cond.Parse("outcome=success || outcome=retry")
	var se *cond.SyntaxError
	if errors.As(err, &se) {
		fmt.Println(se.Offset, se.Msg)
	}
	// Output:
	// true
	// false
	// 16 unsupported operator ||: conditions use =, != and &&
}
