package main

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/eventsourced/accounts/internal/operator"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/uow"
)

// sqliteWith makes a migrated SQLite database holding msgs, and returns
// the environment of an app on it.
func sqliteWith(t *testing.T, msgs ...outbox.Message) map[string]string {
	t.Helper()
	return sqliteWithIn(t, t.Context(), msgs...)
}

// sqliteWithIn is sqliteWith adding msgs under ctx, which gives them their
// origin.
func sqliteWithIn(t *testing.T, ctx context.Context, msgs ...outbox.Message) map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "accounts.db")
	env := map[string]string{"DATABASE_URL": "sqlite:" + path}
	if _, err := runApp(t, t.Context(), env, "migrate"); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Runner(nil).Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		return db.Outbox().Add(ctx, tx, msgs...)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return env
}

// buryIn buries msgs, due now in the SQLite database of env, with reason,
// as a relay that could not deliver them would.
func buryIn(t *testing.T, env map[string]string, reason string, msgs ...outbox.Message) {
	t.Helper()
	db, err := sqlite.Open(t.Context(), strings.TrimPrefix(env["DATABASE_URL"], "sqlite:"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, m := range msgs {
		ctx := outbox.WithScope(t.Context(), outbox.Scope{Only: []string{m.Topic}})
		got, err := db.Outbox().Claim(ctx, time.Now(), time.Minute, 1)
		if err != nil || len(got) != 1 || got[0].ID != m.ID {
			t.Fatalf("claim of %s: %v, %v", m.ID, got, err)
		}
		if err := db.Outbox().Bury(t.Context(), m.ID, reason); err != nil {
			t.Fatal(err)
		}
	}
}

// app outbox: what operators do with the messages the relay could not
// deliver.
func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	// An operator sees what the relay buried and gives it another chance.
	t.Run("ListsAndRequeuesBuriedMessages", func(t *testing.T) {
		t.Parallel()
		m, err := outbox.NewMessage("sms.login_code", map[string]string{"to": "+15550100"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		env := sqliteWith(t, m)
		buryIn(t, env, "550 5.7.1 relaying denied", m)

		out, err := runApp(t, t.Context(), env, "outbox", "buried")
		if err != nil || !strings.Contains(out, m.ID.String()) || !strings.Contains(out, "550 5.7.1 relaying denied") {
			t.Fatalf("outbox buried: %q, %v; want the message with its reason", out, err)
		}
		for _, bad := range [][]string{{"requeue"}, {"requeue", "--all", m.ID.String()}, {"requeue", "not-an-id"}} {
			if _, err := runApp(t, t.Context(), env, append([]string{"outbox"}, bad...)...); err == nil {
				t.Errorf("outbox %v: accepted", bad)
			}
		}
		out, err = runApp(t, t.Context(), env, "outbox", "requeue", "--all")
		if err != nil || out != "requeued 1\n" {
			t.Fatalf("outbox requeue --all: %q, %v", out, err)
		}
		out, err = runApp(t, t.Context(), env, "outbox", "buried")
		if err != nil || strings.Contains(out, m.ID.String()) {
			t.Fatalf("outbox buried after requeue: %q, %v; want it gone", out, err)
		}
		if _, err := runApp(t, t.Context(), env, "outbox", "requeue", m.ID.String()); err == nil {
			t.Error("requeue of a message that is no longer buried: accepted")
		}
	})
	// An operator lists messages by state, looks at one without seeing its
	// code, and throws buried ones away, never one still to deliver.
	t.Run("ListsShowsAndDiscards", func(t *testing.T) {
		t.Parallel()
		const code = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
		lost, err := outbox.NewMessage("sms.login_code", map[string]string{"to": "+15550100", "code": code}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		kept, err := outbox.NewMessage("mail.login_link", map[string]string{"to": "ada@example.com", "url": "https://accounts.test/sign-in?code=" + code}, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		env := sqliteWith(t, lost, kept)
		buryIn(t, env, "550 5.7.1 relaying denied", lost)

		out, err := runApp(t, t.Context(), env, "outbox", "list")
		if err != nil || !strings.Contains(out, lost.ID.String()+"  sms.login_code   buried") || !strings.Contains(out, kept.ID.String()+"  mail.login_link  waiting") {
			t.Errorf("outbox list: %q, %v; want both with their states", out, err)
		}
		out, err = runApp(t, t.Context(), env, "outbox", "list", "--state", "buried", "--json")
		var rec operator.RecordJSON
		if err != nil || json.Unmarshal([]byte(out), &rec) != nil || rec.ID != lost.ID || rec.State != "buried" {
			t.Errorf("outbox list --state buried --json: %q, %v; want the buried one as JSON", out, err)
		}
		for _, id := range []string{lost.ID.String(), kept.ID.String()} {
			for _, args := range [][]string{{"outbox", "show", id}, {"outbox", "show", id, "--json"}} {
				out, err := runApp(t, t.Context(), env, args...)
				if err != nil || !strings.Contains(out, id) || strings.Contains(out, code) || !strings.Contains(out, "REDACTED") {
					t.Errorf("%v: %q, %v; want the message with its code redacted", args, out, err)
				}
			}
		}
		if _, err := runApp(t, t.Context(), env, "outbox", "discard", kept.ID.String()); !errors.Is(err, outbox.ErrNotBuried) {
			t.Errorf("discard of a message still to deliver: %v, want outbox.ErrNotBuried", err)
		}
		for _, bad := range [][]string{{"discard"}, {"discard", "--topic", "x"}, {"discard", "--buried", lost.ID.String()}, {"show"}, {"list", "--state", "asleep"}} {
			var ue *usageError
			if _, err := runApp(t, t.Context(), env, append([]string{"outbox"}, bad...)...); !errors.As(err, &ue) {
				t.Errorf("outbox %v: %v, want a usage error", bad, err)
			}
		}
		out, err = runApp(t, t.Context(), env, "outbox", "discard", "--buried", "--topic", "sms.login_code")
		if err != nil || out != "discarded 1 buried messages\n" {
			t.Errorf("outbox discard --buried: %q, %v", out, err)
		}
		out, err = runApp(t, t.Context(), env, "outbox", "list")
		if err != nil || strings.Contains(out, lost.ID.String()) || !strings.Contains(out, kept.ID.String()) {
			t.Errorf("outbox list after the discard: %q, %v; want only the message still to deliver", out, err)
		}
	})
	// Requeue says which named message is not buried, and which is not
	// there, and requeues the others; a buried message is listed and
	// shown without a due time, since it is due never until requeued.
	t.Run("RequeueAndListSayWhatIsBuried", func(t *testing.T) {
		t.Parallel()
		msg := func(due time.Time) outbox.Message {
			m, err := outbox.NewMessage("mail.login_link", map[string]string{"to": "ada@example.com"}, due)
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		buried, alsoBuried, waiting := msg(time.Now()), msg(time.Now()), msg(time.Now().Add(time.Hour))
		env := sqliteWith(t, buried, alsoBuried, waiting)
		db, err := sqlite.Open(t.Context(), strings.TrimPrefix(env["DATABASE_URL"], "sqlite:"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []outbox.Message{buried, alsoBuried} {
			if err := db.Outbox().Bury(t.Context(), m.ID, "550 no such mailbox"); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		out, err := runApp(t, t.Context(), env, "outbox", "list", "--state", "buried")
		if err != nil || !regexp.MustCompile(`(?m)^`+buried.ID.String()+` +mail\.login_link +buried +0 +- +550 no such mailbox$`).MatchString(out) {
			t.Errorf("outbox list --state buried: %q, %v; want the message with no due time", out, err)
		}
		out, err = runApp(t, t.Context(), env, "outbox", "list", "--state", "buried", "--json")
		if err != nil || strings.Contains(out, "due_at") || strings.Count(out, `"state":"buried"`) != 2 {
			t.Errorf("outbox list --state buried --json: %q, %v; want both buried, with no due_at", out, err)
		}
		out, err = runApp(t, t.Context(), env, "outbox", "show", buried.ID.String())
		if err != nil || regexp.MustCompile(`(?m)^due `).MatchString(out) || !strings.Contains(out, "buried ") {
			t.Errorf("outbox show of a buried message: %q, %v; want no due time", out, err)
		}
		if out, err := runApp(t, t.Context(), env, "outbox", "show", waiting.ID.String()); err != nil || !regexp.MustCompile(`(?m)^due +\S`).MatchString(out) {
			t.Errorf("outbox show of a waiting message: %q, %v; want its due time", out, err)
		}

		_, err = runApp(t, t.Context(), env, "outbox", "requeue", waiting.ID.String())
		if !errors.Is(err, outbox.ErrNotBuried) || !strings.Contains(err.Error(), "waiting") || strings.Contains(err.Error(), "not found") {
			t.Errorf("requeue of a message still to deliver: %v, want outbox.ErrNotBuried that says it is waiting", err)
		}
		unknown := msg(time.Now()).ID
		if _, err := runApp(t, t.Context(), env, "outbox", "requeue", unknown.String()); !errors.Is(err, outbox.ErrNotFound) {
			t.Errorf("requeue of a message that is not there: %v, want outbox.ErrNotFound", err)
		}
		out, err = runApp(t, t.Context(), env, "outbox", "requeue", buried.ID.String(), waiting.ID.String())
		if out != "requeued 1 of 2 messages\n" || !errors.Is(err, outbox.ErrNotBuried) {
			t.Errorf("requeue of a buried message and one still to deliver: %q, %v; want the buried one requeued, and an error for the other", out, err)
		}
		out, err = runApp(t, t.Context(), env, "outbox", "list", "--state", "buried")
		if err != nil || strings.Contains(out, buried.ID.String()) || !strings.Contains(out, alsoBuried.ID.String()) {
			t.Errorf("outbox list --state buried after the requeue: %q, %v; want only the other buried one", out, err)
		}
	})
	// An operator sees which request added a message, and in which trace,
	// to find its other log lines and spans.
	t.Run("ShowsTheRequestThatAddedIt", func(t *testing.T) {
		t.Parallel()
		const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		m, err := outbox.NewMessage("sms.login_code", map[string]string{"to": "+15550100"}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		ctx := propagation.TraceContext{}.Extract(requestid.With(t.Context(), "req-42"),
			propagation.MapCarrier{"traceparent": traceparent})
		env := sqliteWithIn(t, ctx, m)
		out, err := runApp(t, t.Context(), env, "outbox", "show", m.ID.String())
		if err != nil || !strings.Contains(out, "request id   req-42") || !strings.Contains(out, "traceparent  "+traceparent) {
			t.Errorf("outbox show: %q, %v; want its request ID and traceparent", out, err)
		}
		out, err = runApp(t, t.Context(), env, "outbox", "show", m.ID.String(), "--json")
		var rec operator.RecordJSON
		if err != nil || json.Unmarshal([]byte(out), &rec) != nil || rec.RequestID != "req-42" || rec.TraceParent != traceparent {
			t.Errorf("outbox show --json: %q, %v; want its request ID and traceparent", out, err)
		}
	})
}
