package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/uow"
)

// An operator sees what the relay buried and gives it another chance.
func TestOperatorListsAndRequeuesBuriedMessages(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "accounts.db")
	env := map[string]string{"DATABASE_URL": "sqlite:" + path}
	if _, err := runApp(t, t.Context(), env, "migrate"); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := outbox.NewMessage("sms.login_code", map[string]string{"to": "+15550100"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		return db.Outbox().Add(ctx, tx, m)
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}

	out, err := runApp(t, t.Context(), env, "outbox", "drain")
	if err != nil || out != "claimed 1, delivered 0, retried 0, buried 1\n" {
		t.Fatalf("outbox drain: %q, %v; want the message claimed and not delivered", out, err)
	}
	out, err = runApp(t, t.Context(), env, "outbox", "buried")
	if err != nil || !strings.Contains(out, m.ID.String()) || !strings.Contains(out, `no handler for topic "sms.login_code"`) {
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
}
