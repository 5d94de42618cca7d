// Command switchyard runs, validates and serves Switchyard graphs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// exitError carries a process exit status out of a command.
// Code 1 means the work failed (a pipeline failed, a file has errors);
// code 2 means invalid input or usage.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageErr wraps err as a usage error (exit status 2).
func usageErr(err error) error { return &exitError{code: 2, err: err} }

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "switchyard",
		Short:         "An event-driven actor dataflow runtime for multi-agent work",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.Version = buildVersion().String()
	root.SetVersionTemplate("switchyard {{.Version}}\n")
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
	for _, add := range subcommands {
		root.AddCommand(add())
	}
	addCompletions(root)
	return root
}

// subcommands is filled by the files of this package, one per command.
var subcommands []func() *cobra.Command

// execute runs the CLI and returns the process exit status.
func execute(args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, "switchyard:", ee.err)
		}
		return ee.code
	}
	fmt.Fprintln(stderr, "switchyard:", err)
	return 2
}

func main() { os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr)) }

// interruptible returns ctx ended by the first SIGINT or SIGTERM, and what
// releases it. From that first signal on, the signals have their default
// effect again: a second one ends the process at once, cutting short a
// graceful stop that waits (on a NATS server nobody can reach, say).
// Nothing acknowledged is lost by it: what was not recorded runs again on
// resume, as after a crash.
func interruptible(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	go func() { // ends with ctx: at the signal, or when the caller releases it
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}
