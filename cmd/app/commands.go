package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/outbox"
)

// serve runs the relay until ctx is done. The HTTP API joins it later.
func serve(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		return err
	}
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	db, err := e.openDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	if !e.cfg.Relay {
		e.log.Info("relay off (RELAY=false); nothing else to run yet")
		<-ctx.Done()
		return nil
	}
	relay, err := outbox.NewRelay(db.Outbox(), e.handlers(), e.cfg.Outbox, outbox.WithLogger(e.log))
	if err != nil {
		return err
	}
	e.log.Info("relay running", "batch", e.cfg.Outbox.Batch, "interval", e.cfg.Outbox.Interval)
	if err := relay.Run(ctx); err != nil {
		return err
	}
	e.log.Info("relay stopped")
	return nil
}

func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	db, err := e.openDB(ctx)
	if err != nil {
		return err
	}
	db.Close()
	fmt.Fprintln(stdout, "database is up to date")
	return nil
}

func printConfig(stdout io.Writer) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "VARIABLE\tDEFAULT\tMEANING")
	for _, v := range config.Describe() {
		def := v.Default
		if def == "" {
			def = "-"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\n", v.Name, def, v.Description)
	}
	return w.Flush()
}

func outboxCommand(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("outbox: want a subcommand: drain or buried")
	}
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	switch args[0] {
	case "drain":
		db, err := e.openDB(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		relay, err := outbox.NewRelay(db.Outbox(), e.handlers(), e.cfg.Outbox, outbox.WithLogger(e.log))
		if err != nil {
			return err
		}
		stats, err := relay.Drain(ctx)
		fmt.Fprintf(stdout, "claimed %d, delivered %d\n", stats.Claimed, stats.Delivered)
		return err
	case "buried":
		fs := flag.NewFlagSet("outbox buried", flag.ContinueOnError)
		fs.SetOutput(stderr)
		limit := fs.Int("limit", 100, "most messages to list")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		db, err := e.openDB(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		buried, err := db.Outbox().Buried(ctx, *limit)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "ID\tTOPIC\tATTEMPTS\tBURIED\tREASON")
		for _, b := range buried {
			fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", b.ID, b.Topic, b.Attempts, b.BuriedAt.Format("2006-01-02T15:04:05Z"), b.LastError)
		}
		return w.Flush()
	default:
		return fmt.Errorf("outbox: unknown subcommand %q: want drain or buried", args[0])
	}
}
