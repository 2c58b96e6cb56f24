package main

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/config"
	"github.com/eventsourced/accounts/internal/operator"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/user"
)

// migrate applies the database migrations, as opening the database does,
// and says so once the database is closed.
func migrate(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	db, err := e.openDB(ctx)
	if err != nil {
		return err
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("migrate: close: %w", err)
	}
	fmt.Fprintln(stdout, "database is up to date")
	return nil
}

func printConfig(stdout io.Writer, getenv func(string) string, defaults bool) error {
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	if defaults {
		fmt.Fprintln(w, "VARIABLE\tDEFAULT\tMEANING")
	} else {
		fmt.Fprintln(w, "VARIABLE\tVALUE\tFROM\tMEANING")
	}
	for _, v := range config.Describe() {
		def := v.Default
		if def == "" {
			def = "-"
		}
		if defaults {
			fmt.Fprintf(w, "%s\t%s\t%s\n", v.Name, def, v.Description)
			continue
		}
		value, from := v.Shown(getenv(v.Name)), "environment"
		if value == "" {
			value, from = def, "default"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", v.Name, value, from, v.Description)
	}
	if err := w.Flush(); err != nil || defaults {
		return err
	}
	// What the OTEL_ variables add up to; a configuration that does not
	// load says why at the start of a command instead.
	if cfg, err := config.Load(getenv); err == nil {
		fmt.Fprintf(stdout, "\ntracing: %s\n", cfg.Tracing.InEffect())
	}
	return nil
}

// outboxDrain delivers what is due now in one synchronous pass, of the
// topics whose handlers work in this configuration: mail only through
// SMTP_URL, never printed on the operator's terminal; what it cannot
// deliver it leaves in the outbox, and says so on stderr.
func outboxDrain(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	if e.cfg.SMTPURL == "" {
		fmt.Fprintln(stderr, "SMTP_URL is unset: mail is left in the outbox for a relay that can send it")
	}
	db, err := e.openDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	keys, err := e.keyring(ctx, db)
	if err != nil {
		return err
	}
	meter, _, err := newMetrics(false)
	if err != nil {
		return err
	}
	relay, err := e.relay(db, keys, meter)
	if err != nil {
		return err
	}
	defer relay.Close()
	return operator.Outbox{Out: stdout, Err: stderr}.Drain(ctx, relay.Relay, e.cfg.Outbox.Lease)
}

// outboxBuried lists up to limit buried messages with their reasons.
func outboxBuried(ctx context.Context, getenv func(string) string, limit int, stdout, stderr io.Writer) error {
	db, err := existingDB(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	return operator.Outbox{Store: db.Outbox(), Out: stdout}.Buried(ctx, limit)
}

// projectionsCommand rebuilds a projection, or tells where each
// asynchronous one stands.
//
// what is "status", "views" (rebuild the inline views of the accounts
// and of the organizations) or "activity"
// (rebuild it blue/green).
func projectionsCommand(ctx context.Context, what string, getenv func(string) string, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	if what == "status" {
		db, err := e.openExistingDB(ctx)
		if err != nil {
			return err
		}
		defer db.Close()
		// Only the projections' names, versions and types are read: no
		// event is applied, and no address opened.
		return operator.Projections{Log: db.Log(async.LogConfig{}), Out: stdout}.Status(ctx, activity(db, nil))
	}
	db, keys, err := e.openWithKeys(ctx, e.openDB)
	if err != nil {
		return err
	}
	defer db.Close()
	p := operator.Projections{Log: db.Log(async.LogConfig{}), Out: stdout, Err: stderr, Logger: e.log}
	if what == "activity" {
		return p.RebuildBlueGreen(ctx, activity(db, keys))
	}
	if err := p.RebuildViews(ctx, db.Runner(nil), db.Events(), user.ViewsProjection{Views: db.Views(), Keys: keys}); err != nil {
		return err
	}
	n, err := projections.Rebuild(ctx, db.Runner(nil), db.Events(), org.ViewsProjection{Views: db.OrgViews(), Keys: keys})
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "rebuilt the organizations' views from %d events\n", n)
	return nil
}

// requeue makes buried messages due again now: those named by ID, or with
// --all every buried one.
func requeue(ctx context.Context, getenv func(string) string, ids []uuid.UUID, all bool, stdout, stderr io.Writer) error {
	e, err := load(getenv, stderr)
	if err != nil {
		return err
	}
	db, err := e.openDB(ctx)
	if err != nil {
		return err
	}
	defer db.Close()
	return operator.Outbox{Store: db.Outbox(), Out: stdout}.Requeue(ctx, ids, all)
}

// existingDB loads the configuration and opens the database it names,
// which must exist, for the operators' commands.
func existingDB(ctx context.Context, getenv func(string) string, stderr io.Writer) (backend.Backend, error) {
	e, err := load(getenv, stderr)
	if err != nil {
		return nil, err
	}
	return e.openExistingDB(ctx)
}

// outboxList prints the messages that f admits, as a table or JSON lines.
func outboxList(ctx context.Context, getenv func(string) string, f outbox.ListFilter, asJSON bool, stdout, stderr io.Writer) error {
	db, err := existingDB(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	return operator.Outbox{Store: db.Outbox(), Out: stdout}.List(ctx, f, asJSON)
}

// outboxShow prints one message with its payload, secrets redacted.
func outboxShow(ctx context.Context, getenv func(string) string, id uuid.UUID, asJSON bool, stdout, stderr io.Writer) error {
	db, err := existingDB(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	return operator.Outbox{Store: db.Outbox(), Out: stdout}.Show(ctx, id, asJSON)
}

// outboxDiscard deletes the buried messages that d names.
func outboxDiscard(ctx context.Context, getenv func(string) string, d operator.Discarded, stdout, stderr io.Writer) error {
	db, err := existingDB(ctx, getenv, stderr)
	if err != nil {
		return err
	}
	defer db.Close()
	return operator.Outbox{Store: db.Outbox(), Out: stdout}.Discard(ctx, d)
}
