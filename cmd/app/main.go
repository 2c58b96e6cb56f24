package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal starts a stop within SHUTDOWN_GRACE; a second one
	// ends the process at once, as if no handler were installed.
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	var ue *usageError
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

// run is the whole program: main only supplies the process's context,
// arguments, environment and output, so tests can call run as it is. A
// command line that cannot be run is a [*usageError], after the usage of
// the command it names on stderr.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	root := commands(getenv, stdout, stderr)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	var ue *usageError
	if errors.As(err, &ue) && cmd != nil {
		fmt.Fprint(stderr, cmd.UsageString())
	}
	return err
}
