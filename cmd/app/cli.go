package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/eventsourced/accounts/internal/bench"
	"github.com/eventsourced/accounts/internal/operator"
	"github.com/eventsourced/accounts/internal/outbox"
)

// usageError is a command line that cannot be run: an unknown command or
// flag, or arguments a command does not take. main exits 2 for it, after
// the command's usage.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// commands returns the command tree of one run of the program, whose
// commands read the environment through getenv and write to stdout and
// stderr. -h and --help print a command's usage, with its own flags, to
// stdout and do nothing else.
func commands(getenv func(string) string, stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "app",
		Short: "The account service, and the tools to run, inspect and measure it",
		Long: `The account service: its HTTP API, its outbox relay and its asynchronous
projections, and the tools to run, migrate, inspect and measure them.
Configuration comes from the environment; see 'app config'.`,
		Version:       version(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), getenv, stdout, stderr)
		},
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.CompletionOptions.DisableDefaultCmd = true
	leaf := func(use, short string, args cobra.PositionalArgs, run func(ctx context.Context, args []string) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: args,
			RunE: func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args) }}
	}
	group := func(use, short string, subs ...*cobra.Command) *cobra.Command {
		c := &cobra.Command{Use: use, Short: short, Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return &usageError{fmt.Errorf("%s: want a command: %s", strings.TrimPrefix(cmd.CommandPath(), "app "), strings.Join(subcommands(cmd), ", "))}
			}}
		c.AddCommand(subs...)
		return c
	}

	root.AddCommand(
		leaf("serve", "Run the service until SIGINT or SIGTERM (the default)", noArgs,
			func(ctx context.Context, _ []string) error { return serve(ctx, getenv, stdout, stderr) }),
		leaf("migrate", "Apply the database migrations", noArgs,
			func(ctx context.Context, _ []string) error { return migrate(ctx, getenv, stdout, stderr) }),
		configCommand(getenv, stdout, leaf),
		leaf("version", "Print the module version and the revision it was built from", noArgs,
			func(context.Context, []string) error { _, err := fmt.Fprintln(stdout, version()); return err }),
		outboxCommands(getenv, stdout, stderr, leaf, group),
		devmailCommand(stdout, stderr, leaf),
		healthcheckCommand(getenv, stdout, leaf),
		group("projections", "Rebuild projections, or say where each stands",
			group("rebuild", "Rebuild a projection",
				leaf("views", "Rebuild the inline views of accounts and organizations from the events", noArgs,
					func(ctx context.Context, _ []string) error {
						return projectionsCommand(ctx, "views", getenv, stdout, stderr)
					}),
				leaf("activity", "Rebuild the activity blue/green while the service serves", noArgs,
					func(ctx context.Context, _ []string) error {
						return projectionsCommand(ctx, "activity", getenv, stdout, stderr)
					}),
			),
			leaf("status", "Each asynchronous projection's versions, lag and state", noArgs,
				func(ctx context.Context, _ []string) error {
					return projectionsCommand(ctx, "status", getenv, stdout, stderr)
				}),
		),
		keysCommands(getenv, stdout, stderr, leaf, group),
		benchCommands(getenv, stdout, stderr, group),
	)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err} })
	return root
}

type (
	leafFunc  = func(use, short string, args cobra.PositionalArgs, run func(ctx context.Context, args []string) error) *cobra.Command
	groupFunc = func(use, short string, subs ...*cobra.Command) *cobra.Command
)

func keysCommands(getenv func(string) string, stdout, stderr io.Writer, leaf leafFunc, group groupFunc) *cobra.Command {
	var id string
	newKey := leaf("new", "Print a DATA_KEY value of one fresh master key", noArgs,
		func(context.Context, []string) error { return keysNew(id, stdout) })
	newKey.Flags().StringVar(&id, "id", "k1", "the key's ID: 1 to 32 of a-z, 0-9 and -")
	newKey.Long = `Print a DATA_KEY value of one fresh master key, ID:KEY. To rotate, put a new
key first in DATA_KEY and keep the old one after it (NEW,OLD), restart every
instance, run 'app keys rotate', then drop the old key.`
	return group("keys", "Make and rotate the master keys that wrap each person's data key",
		newKey,
		leaf("rotate", "Rewrap every data key with the first master key of DATA_KEY", noArgs,
			func(ctx context.Context, _ []string) error { return keysRotate(ctx, getenv, stdout, stderr) }),
	)
}

func devmailCommand(stdout, stderr io.Writer, leaf leafFunc) *cobra.Command {
	var addr string
	c := leaf("devmail", "A mail catcher for trying the service: an SMTP server on loopback that prints each mail", noArgs,
		func(ctx context.Context, _ []string) error { return devmail(ctx, addr, stdout, stderr) })
	c.Flags().StringVar(&addr, "addr", "127.0.0.1:1025", "loopback address to listen on")
	return c
}

func healthcheckCommand(getenv func(string) string, stdout io.Writer, leaf leafFunc) *cobra.Command {
	var timeout time.Duration
	c := leaf("healthcheck", "Exit 0 if this machine's instance answers /readyz with 200, 1 otherwise: a container's health check", noArgs,
		func(ctx context.Context, _ []string) error { return healthcheck(ctx, getenv, timeout, stdout) })
	c.Long = `Ask /readyz of the instance that the configuration describes, on this
machine: on the admin listener when ADMIN_ADDR is set, and otherwise on
HTTP_ADDR. Exit 0 if it answers 200, and 1 otherwise, saying why. It is
the health check of a container, whose image has no shell or curl:
  healthcheck: {test: ["CMD", "/app", "healthcheck"]}`
	c.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return c
}

func configCommand(getenv func(string) string, stdout io.Writer, leaf leafFunc) *cobra.Command {
	var defaults bool
	c := leaf("config", "Every environment variable: its value in effect, from where, and its meaning", noArgs,
		func(context.Context, []string) error { return printConfig(stdout, getenv, defaults) })
	c.Long = `Every environment variable with the value in effect, from the environment or
the default, and its meaning. Secrets are masked, and so are the passwords of
URLs. --defaults lists the defaults instead.`
	c.Flags().BoolVar(&defaults, "defaults", false, "list each variable's default instead of its value")
	return c
}

func outboxCommands(getenv func(string) string, stdout, stderr io.Writer, leaf leafFunc, group groupFunc) *cobra.Command {
	var limit int
	buried := leaf("buried", "List buried messages with their reasons", noArgs,
		func(ctx context.Context, _ []string) error { return outboxBuried(ctx, getenv, limit, stdout, stderr) })
	buried.Flags().IntVar(&limit, "limit", 100, "most messages to list")
	var all bool
	requeueCmd := leaf("requeue ID... | --all", "Give buried messages another chance: those named, or --all", cobra.ArbitraryArgs,
		func(ctx context.Context, args []string) error {
			ids := make([]uuid.UUID, 0, len(args))
			for _, a := range args {
				id, err := uuid.Parse(a)
				if err != nil {
					return &usageError{fmt.Errorf("outbox requeue: %q is not a message ID", a)}
				}
				ids = append(ids, id)
			}
			if all == (len(ids) > 0) {
				return &usageError{errors.New("outbox requeue: name the IDs of buried messages (app outbox buried lists them), or give --all")}
			}
			return requeue(ctx, getenv, ids, all, stdout, stderr)
		})
	requeueCmd.Flags().BoolVar(&all, "all", false, "requeue every buried message")
	var f outbox.ListFilter
	var asJSON bool
	list := leaf("list", "List messages: due, waiting (leased or to retry) and buried", noArgs,
		func(ctx context.Context, _ []string) error {
			switch f.State {
			case "", outbox.StateDue, outbox.StateWaiting, outbox.StateBuried:
			default:
				return &usageError{fmt.Errorf("outbox list: --state must be due, waiting or buried, got %q", f.State)}
			}
			return outboxList(ctx, getenv, f, asJSON, stdout, stderr)
		})
	list.Flags().StringVar(&f.State, "state", "", "only messages in this state: due, waiting or buried")
	list.Flags().StringVar(&f.Topic, "topic", "", "only messages of this topic")
	list.Flags().IntVar(&f.Limit, "limit", 100, "most messages to list")
	list.Flags().BoolVar(&asJSON, "json", false, "one JSON object a line instead of a table")
	var showJSON bool
	show := leaf("show ID", "Show one message: its attempts, due time, last error and payload (secrets redacted)", oneArg,
		func(ctx context.Context, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return &usageError{fmt.Errorf("outbox show: %q is not a message ID", args[0])}
			}
			return outboxShow(ctx, getenv, id, showJSON, stdout, stderr)
		})
	show.Flags().BoolVar(&showJSON, "json", false, "a JSON object instead of a table")
	var buriedAll bool
	var topic string
	var olderThan time.Duration
	discard := leaf("discard ID... | --buried [--topic T] [--older-than D]", "Throw buried messages away: those named, or every one buried (of a topic, longer ago than D)", cobra.ArbitraryArgs,
		func(ctx context.Context, args []string) error {
			ids := make([]uuid.UUID, 0, len(args))
			for _, a := range args {
				id, err := uuid.Parse(a)
				if err != nil {
					return &usageError{fmt.Errorf("outbox discard: %q is not a message ID", a)}
				}
				ids = append(ids, id)
			}
			if buriedAll == (len(ids) > 0) || (!buriedAll && (topic != "" || olderThan != 0)) {
				return &usageError{errors.New("outbox discard: name the IDs of buried messages, or give --buried (with --topic and --older-than to narrow it)")}
			}
			return outboxDiscard(ctx, getenv, operator.Discarded{IDs: ids, Buried: buriedAll, Topic: topic, OlderThan: olderThan}, stdout, stderr)
		})
	discard.Flags().BoolVar(&buriedAll, "buried", false, "every buried message")
	discard.Flags().StringVar(&topic, "topic", "", "with --buried: only this topic")
	discard.Flags().DurationVar(&olderThan, "older-than", 0, "with --buried: only those buried longer ago than this")
	return group("outbox", "Deliver, inspect, requeue and discard outbox messages",
		leaf("drain", "Deliver the messages due now in one synchronous pass", noArgs,
			func(ctx context.Context, _ []string) error { return outboxDrain(ctx, getenv, stdout, stderr) }),
		list,
		show,
		buried,
		requeueCmd,
		discard,
	)
}

func benchCommands(getenv func(string) string, stdout, stderr io.Writer, group groupFunc) *cobra.Command {
	// Each benchmark binds its flags to options of its own: flags that
	// share a name would otherwise write one another's defaults.
	b := func(name, short string, flags func(*pflag.FlagSet, *benchOptions)) *cobra.Command {
		o := &benchOptions{}
		c := &cobra.Command{Use: name, Short: short, Args: noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				err := runBench(cmd.Context(), name, *o, getenv, stdout, stderr)
				var cut *bench.CutShortError
				if err != nil && !errors.As(err, &cut) && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
					// Ended while it filled its database, before it timed
					// anything: the summary line says so.
					fmt.Fprintf(stdout, "%s: nothing measured (cut short before timing began)\n", name)
					return fmt.Errorf("cut short before timing began: %w", err)
				}
				return err
			}}
		c.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
		c.Flags().StringVar(&o.profiles.CPU, "cpuprofile", "", "write a CPU profile of the timed part to this file")
		c.Flags().StringVar(&o.profiles.Trace, "trace", "", "write an execution trace of the timed part to this file (go tool trace)")
		c.Flags().BoolVar(&o.traceSink, "trace-sink", false, "turn tracing on, exporting over OTLP/HTTP to a receiver in this process that discards the spans (OTEL_TRACES_SAMPLER still applies)")
		flags(c.Flags(), o)
		return c
	}
	holdXmin := func(f *pflag.FlagSet, o *benchOptions) {
		f.BoolVar(&o.holdXmin, "hold-xmin", false, "hold PostgreSQL's xmin horizon for the whole run, as a long REPEATABLE READ transaction that has read something does")
	}
	rate := func(f *pflag.FlagSet, o *benchOptions, what string) {
		f.IntVar(&o.rate, "rate", 200, what+" committed per second, one per transaction")
		f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to send")
	}
	return group("bench", "Measure the relay, the API and the projections",
		b("drain", "How fast the relay empties a full outbox", func(f *pflag.FlagSet, o *benchOptions) {
			f.IntVar(&o.messages, "messages", 50000, "messages to deliver")
			holdXmin(f, o)
		}),
		b("latency", "Time from commit to handler, after a second at the rate that is not counted", func(f *pflag.FlagSet, o *benchOptions) {
			rate(f, o, "messages")
			f.BoolVar(&o.closedLoop, "closed-loop", false, "send as riverbench's latency mode does, for figures beside its: one sender that waits for each commit and drops the ticks it missed (the rate falls when commits are slow)")
			holdXmin(f, o)
		}),
		b("signin", "Sign-in link requests through the HTTP API", func(f *pflag.FlagSet, o *benchOptions) {
			f.IntVar(&o.concurrency, "concurrency", 16, "requests in flight at once")
			f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to send")
			holdXmin(f, o)
		}),
		b("invite", "Invitation rounds through the HTTP API: an owner invites, the relay mails, the address signs in and accepts", func(f *pflag.FlagSet, o *benchOptions) {
			f.IntVar(&o.concurrency, "concurrency", 16, "rounds in flight at once")
			f.DurationVar(&o.duration, "duration", 10*time.Second, "how long to begin rounds")
			f.IntVar(&o.orgs, "orgs", 200, "organizations set up first, each with its owner; each sends the invitations an organization may send in an hour")
			holdXmin(f, o)
		}),
		b("projection", "How fast the activity projection catches up, or (--lag) how far it trails commits", func(f *pflag.FlagSet, o *benchOptions) {
			f.IntVar(&o.events, "events", 50000, "events to catch up on")
			f.BoolVar(&o.lag, "lag", false, "time from commit to projection at --rate for --duration, instead of the catch-up")
			rate(f, o, "events")
			f.DurationVar(&o.poll, "poll", 0, "the log's poll interval (0: the backend's default)")
			f.IntVar(&o.batch, "batch", 0, "events a subscriber reads at a time (0: the backend's default)")
		}),
		b("publish", "How fast integration events reach the configured destination", func(f *pflag.FlagSet, o *benchOptions) {
			f.IntVar(&o.messages, "messages", 50000, "events to publish to each destination")
			f.IntVar(&o.users, "users", 10000, "users the events are about, in turn")
		}),
		b("growth", "Sign-ins, loads, the drain and the projections on an empty database and on one with a long history", func(f *pflag.FlagSet, o *benchOptions) {
			f.IntVar(&o.events, "events", 1_000_000, "events of history the grown database holds")
			f.IntVar(&o.concurrency, "concurrency", 16, "sign-in requests in flight at once")
			f.DurationVar(&o.duration, "duration", 10*time.Second, "how long each round of sign-ins lasts")
			f.IntVar(&o.messages, "messages", 20000, "messages each drain delivers")
			f.IntVar(&o.catchUp, "catch-up", 50000, "events the activity catches up on")
			f.IntVar(&o.samples, "samples", 2000, "streams of each kind loaded for the p99 of a load")
			// Loading and rebuilding millions of events takes longer
			// than the other benchmarks' default.
			t := f.Lookup("timeout")
			t.DefValue = "3h0m0s"
			_ = t.Value.Set(t.DefValue)
		}),
		soakCommand(stdout, stderr),
	)
}

// oneArg takes exactly one positional argument, or is a usage error.
func oneArg(cmd *cobra.Command, args []string) error {
	if len(args) != 1 {
		return &usageError{fmt.Errorf("%s takes one argument, got %d", strings.TrimPrefix(cmd.CommandPath(), "app "), len(args))}
	}
	return nil
}

// noArgs refuses positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if !cmd.HasSubCommands() {
		return &usageError{fmt.Errorf("%s takes no arguments, got %q", cmd.CommandPath(), args[0])}
	}
	err := fmt.Errorf("unknown command %q; want one of %s", args[0], strings.Join(subcommands(cmd), ", "))
	if cmd.HasParent() {
		err = fmt.Errorf("%s: %w", strings.TrimPrefix(cmd.CommandPath(), "app "), err)
	}
	return &usageError{err}
}

// subcommands returns the names of cmd's commands.
func subcommands(cmd *cobra.Command) []string {
	var names []string
	for _, sub := range cmd.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return names
}

// The release and revision that a build stamps in with
// -ldflags "-X main.buildVersion=v1.2.3 -X main.buildRevision=abc123", as
// the Dockerfile does; empty otherwise. They are set by the linker only.
var (
	buildVersion  string
	buildRevision string
)

// version returns the version of the build, the module's or the one
// stamped in, and its VCS revision, the one go build records or else the
// one stamped in, with the Go that built it.
func version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "app (no build information)"
	}
	v := "app " + info.Main.Version
	if buildVersion != "" {
		v = "app " + buildVersion
	}
	var rev, at, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = " (modified)"
			}
		}
	}
	if rev == "" {
		rev = buildRevision
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	if at != "" {
		v += " " + at
	}
	return v + " " + info.GoVersion
}
