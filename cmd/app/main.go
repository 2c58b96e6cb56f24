// Command app is the account service: its HTTP API, its outbox relay, and
// the tools to run, migrate, inspect and measure them.
//
// Usage:
//
//	app [serve]            run the service until SIGINT or SIGTERM
//	app migrate            apply the database migrations
//	app config             list every environment variable, its default and meaning
//	app outbox drain       deliver what is due in one synchronous pass
//	app outbox buried      list buried messages with their reasons
//	app outbox requeue     give buried messages (IDs, or --all) another chance
//	app projections rebuild NAME  rebuild the inline user views (views), or a projection blue/green (activity)
//	app projections status   each asynchronous projection's versions, lag and state
//	app bench drain        measure how fast the relay empties a full outbox
//	app bench latency      measure the time from commit to handler
//	app bench signin       measure sign-in link requests through the API
//	app bench projection   measure how fast the activity projection catches up, or (--lag) how far it trails commits
//	app bench publish      measure how fast integration events reach the configured destination
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

const usage = `usage: app [command]

commands:
  serve             run the service until SIGINT or SIGTERM (the default)
  migrate           apply the database migrations
  config            list every environment variable, its default and meaning
  outbox drain      deliver the messages due now in one synchronous pass
  outbox buried     list buried messages with their reasons
  outbox requeue    give buried messages (IDs, or --all) another chance
  projections rebuild views
                    rebuild the inline user views from the events
  projections rebuild activity
                    rebuild the activity blue/green while the service serves
  projections status
                    each asynchronous projection's versions, lag and state
  bench drain       measure how fast the relay empties a full outbox
  bench latency     measure the time from commit to handler
  bench signin      measure sign-in link requests through the API
  bench projection  measure the activity projection's catch-up, or (--lag)
                    the time from commit to projection
  bench publish     measure how fast integration events reach the
                    configured destination (BROKER_URL, WEBHOOK_URL)

Configuration comes from the environment; see 'app config'.
`

// run is the whole program: main only supplies the process's context,
// arguments, environment and output, so tests can call run as it is.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		return serve(ctx, args, getenv, stderr)
	case "migrate":
		return migrate(ctx, args, getenv, stdout, stderr)
	case "config":
		return printConfig(stdout)
	case "outbox":
		return outboxCommand(ctx, args, getenv, stdout, stderr)
	case "projections":
		return projectionsCommand(ctx, args, getenv, stdout, stderr)
	case "bench":
		return bench(ctx, args, getenv, stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	default:
		fmt.Fprint(stderr, usage)
		return fmt.Errorf("unknown command %q", cmd)
	}
}
