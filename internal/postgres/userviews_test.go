package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// userViewTables are the projection tables of [postgres.UserViews], each
// with the order of its primary key.
var userViewTables = []struct{ name, key string }{
	{"users", "id"},
	{"sessions", "token_hash"},
	{"signin_codes", "code_hash"},
	{"email_change_codes", "code_hash"},
	{"email_undo_codes", "code_hash"},
	// No event makes it, and a rebuild leaves it as it is.
	{"session_uses", "token_hash"},
}

// snapshotUserViews returns every row of every projection table, all
// columns in their text form, ordered by primary key.
func snapshotUserViews(t *testing.T, db *postgres.DB) map[string][]string {
	t.Helper()
	snap := map[string][]string{}
	for _, table := range userViewTables {
		rows, err := db.Pool().Query(t.Context(),
			fmt.Sprintf(`SELECT t::text FROM %s AS t ORDER BY %s`, table.name, table.key))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var row string
			if err := rows.Scan(&row); err != nil {
				t.Fatal(err)
			}
			snap[table.name] = append(snap[table.name], row)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

// TestUserViewsRebuildDefersUniqueAddress builds a log whose order is not
// the order in which its transactions committed: the log orders them by
// transaction ID, which a transaction takes at its first write, so one that
// began writing first but committed last comes first. Here that one
// registers an address which the other, committed earlier, freed. Replayed
// in log order, the address is held twice until the change that frees it,
// which only the constraint that [postgres.UserViews.Reset] defers to the
// commit lets through.
func TestUserViewsRebuildDefersUniqueAddress(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := t.Context()
	runner, store, views := db.Runner(nil), db.Events(), user.ViewsProjection{Views: postgres.UserViews{}}
	ada, bob := uuid.Must(uuid.NewV7()), uuid.Must(uuid.NewV7())
	const x, y = "x@example.com", "y@example.com"

	// appendApply appends one event as the service does, and applies it.
	appendApply := func(ctx context.Context, tx uow.Tx, id uuid.UUID, typ string, data any) error {
		e, err := eventstore.NewEvent(typ, data, eventstore.Metadata{})
		if err != nil {
			return err
		}
		appended, err := store.Append(ctx, tx, "user-"+id.String(), eventstore.Any, e)
		if err != nil {
			return err
		}
		return views.Apply(ctx, tx, appended...)
	}

	err := runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		return appendApply(ctx, tx, ada, user.TypeRegistered, user.Registered{UserID: ada, Email: x})
	})
	if err != nil {
		t.Fatal(err)
	}

	// Bob's unit of work takes its transaction ID, then waits while Ada's
	// moves her from x to y and commits; then it registers Bob at x.
	xidTaken, proceed := make(chan struct{}), make(chan struct{})
	release := sync.OnceFunc(func() { close(proceed) })
	// Runs before pgtest's cleanup, which waits for connections.
	t.Cleanup(release)
	bobDone := make(chan error, 1)
	go func() {
		bobDone <- runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
			ptx, err := postgres.PgxTx(tx)
			if err != nil {
				return err
			}
			if _, err := ptx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
				return err
			}
			close(xidTaken)
			<-proceed
			return appendApply(ctx, tx, bob, user.TypeRegistered, user.Registered{UserID: bob, Email: x})
		})
	}()
	select {
	case <-xidTaken:
	case err := <-bobDone:
		t.Fatalf("Bob's unit of work ended early: %v", err)
	}
	err = runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		return appendApply(ctx, tx, ada, user.TypeEmailChanged, user.EmailChanged{UserID: ada, OldEmail: x, NewEmail: y, CodeHash: "code"})
	})
	if err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-bobDone; err != nil {
		t.Fatalf("Bob's unit of work: %v", err)
	}

	// The log has Bob's registration before Ada's move, or this test would
	// prove nothing.
	var order []string
	err = runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		events, err := store.ReadCommitted(ctx, tx, eventstore.Position{}, 10)
		for _, e := range events {
			order = append(order, e.Stream+" "+e.Type)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"user-" + ada.String() + " " + user.TypeRegistered, "user-" + bob.String() + " " + user.TypeRegistered, "user-" + ada.String() + " " + user.TypeEmailChanged}
	if !slices.Equal(order, want) {
		t.Fatalf("the log is %v, want %v", order, want)
	}

	n, err := projections.Rebuild(ctx, runner, store, views)
	if err != nil {
		t.Fatalf("Rebuild of a log that holds an address twice until its last event: %v", err)
	}
	if n != len(want) {
		t.Fatalf("Rebuild replayed %d events, want %d", n, len(want))
	}
	err = runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		for email, id := range map[string]uuid.UUID{x: bob, y: ada} {
			u, ok, err := views.Views.UserByEmail(ctx, tx, email)
			if err != nil {
				return err
			}
			if !ok || u.ID != id {
				t.Errorf("after the rebuild, UserByEmail(%s) = %v (found %t), want %s", email, u.ID, ok, id)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
