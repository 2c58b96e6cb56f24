package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/spf13/cobra"

	"github.com/eventsourced/accounts/internal/soak"
)

// soakCommand is `app bench soak`: several instances of this binary under
// load and faults for a long time, held to a ledger at the end. It needs
// postgresql-common (pg_createcluster) and nats-server, and starts its own
// of each; it reads no variable of the app.
func soakCommand(stdout, stderr io.Writer) *cobra.Command {
	var cfg soak.Config
	c := &cobra.Command{
		Use:   "soak",
		Short: "Hours of several instances under load, kills, a PostgreSQL restart and SMTP failures, held to a ledger",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Binary == "" {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("bench soak: %w", err)
				}
				cfg.Binary = exe
			}
			cfg.Log = stderr
			res, err := soak.Run(cmd.Context(), cfg)
			if res != nil {
				printSoak(stdout, cfg, res)
			}
			if err != nil && !errors.Is(err, soak.ErrFailed) && res == nil {
				fmt.Fprintf(stdout, "soak: nothing measured (%v)\n", err)
			}
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&cfg.Binary, "binary", "", "the app binary each instance runs (default: this one)")
	f.StringVar(&cfg.Dir, "dir", "", "keep the instances' logs and the broker's store here (default: a temporary directory, removed when the soak passes)")
	f.IntVar(&cfg.Instances, "instances", 3, "app processes at once")
	f.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "how long the load and the faults last")
	f.IntVar(&cfg.Users, "users", 0, "end the load after this many user flows (0: only --duration ends it)")
	f.IntVar(&cfg.Workers, "workers", 16, "users going through their flows at once")
	f.Float64Var(&cfg.Rate, "rate", 20, "user flows started per second at most (negative: as fast as the workers go)")
	f.DurationVar(&cfg.KillEvery, "kill-every", time.Minute, "SIGKILL an instance (not instance 0) and start it again this often; negative: never")
	f.DurationVar(&cfg.RestartPostgresAt, "restart-postgres-at", 0, "restart PostgreSQL this long into the load (default: halfway); negative: never")
	f.DurationVar(&cfg.SMTPOutageEvery, "smtp-outage-every", 45*time.Second, "make the SMTP server refuse mail this often; negative: never")
	f.DurationVar(&cfg.SMTPOutageFor, "smtp-outage-for", 4*time.Second, "how long each SMTP outage lasts")
	f.DurationVar(&cfg.SampleEvery, "sample-every", 10*time.Second, "time between two samples of memory, tables and latency")
	f.DurationVar(&cfg.Warmup, "warmup", 0, "part of the load after which memory and the outbox must stay flat (default: a fifth of --duration)")
	f.BoolVar(&cfg.CheckTrends, "check-trends", true, "fail when memory or the outbox grows more than 25% after warm-up, or the drain at the end is 10% slower than at the start")
	f.IntVar(&cfg.DrainBurst, "drain-burst", 2000, "sign-in links asked for at once in each drain measurement")
	f.DurationVar(&cfg.MailWait, "mail-wait", 3*time.Minute, "longest wait for one mail")
	f.DurationVar(&cfg.Lease, "lease", 20*time.Second, "the instances' OUTBOX_LEASE (OUTBOX_TIMEOUT is 10s)")
	f.StringVar(&cfg.Picture, "picture", "soak.svg", "write the samples as an SVG picture to this file (empty: none)")
	return c
}

// printSoak prints the report, its summary line last.
func printSoak(w io.Writer, cfg soak.Config, r *soak.Result) {
	var codes []int
	for c := range r.Statuses {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	fmt.Fprintf(w, "answers: %d", r.Requests)
	for _, c := range codes {
		fmt.Fprintf(w, ", %d× %d", r.Statuses[c], c)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "users: %d (%d deleted) in %d flows; faults: %d kills, %d PostgreSQL restarts, %d SMTP outages\n",
		r.Users, r.Deleted, r.Flows, r.Kills, r.PostgresRestart, r.SMTPOutages)
	for _, n := range r.Notes {
		fmt.Fprintln(w, "note:", n)
	}
	const most = 40
	for i, f := range r.Failures {
		if i == most {
			fmt.Fprintf(w, "FAIL: ... and %d more\n", len(r.Failures)-most)
			break
		}
		fmt.Fprintln(w, "FAIL:", f)
	}
	if cfg.Picture != "" {
		fmt.Fprintln(w, "picture:", cfg.Picture)
	}
	fmt.Fprintln(w, r.Summary())
}
