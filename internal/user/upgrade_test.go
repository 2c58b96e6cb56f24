package user_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/eventsourced/accounts/internal/backend"
	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/projections"
	"github.com/eventsourced/accounts/internal/projections/async"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// upgraded is what the release before event versions wrote and answered,
// at At, on a database it left in testdata/upgrade: Ada signed in 20
// minutes before and asked to move to a new address 3 minutes before,
// Dave asked for five links within the window, and Bob for one a minute
// before. The codes and the token are those its mails and sign-in gave;
// the master key is the test's own.
type upgraded struct {
	MasterKey     string             `json:"master_key"`
	At            time.Time          `json:"at"`
	AdaToken      string             `json:"ada_token"`
	BobCode       string             `json:"bob_code"`
	AdaChangeCode string             `json:"ada_change_code"`
	Dave          string             `json:"dave"`
	DaveWait      time.Duration      `json:"dave_retry_after"`
	Me            user.User          `json:"me"`
	Sessions      []user.SessionInfo `json:"sessions"`
}

// TestUpgradeFromBeforeEventVersions opens a database written by the
// release before events had schema versions (a dump of it on each
// backend, whose sign-in links are version 1 of signin.link_requested),
// migrates it, and checks that the service answers as that release did,
// that the views and the activity rebuild from its log, and that the
// codes it mailed still work.
func TestUpgradeFromBeforeEventVersions(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		old := readUpgraded(t, "sqlite")
		path := filepath.Join(t.TempDir(), "old.db")
		raw, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.ExecContext(t.Context(), dump(t, "sqlite.sql")); err != nil {
			t.Fatalf("restore the dump: %v", err)
		}
		if err := raw.Close(); err != nil {
			t.Fatal(err)
		}
		db, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		testUpgrade(t, db, old)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		old := readUpgraded(t, "postgres")
		u := pgtest.NewURL(t)
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		script := strings.ReplaceAll(dump(t, "postgres.sql"), "__SCHEMA__", pgx.Identifier{parsed.Query().Get("search_path")}.Sanitize())
		if _, err := conn.Exec(t.Context(), script); err != nil {
			t.Fatalf("restore the dump: %v", err)
		}
		if err := conn.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		db, err := postgres.Open(t.Context(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		testUpgrade(t, db, old)
	})
}

func testUpgrade(t *testing.T, db backend.Backend, old upgraded) {
	ctx := t.Context()
	if _, err := db.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	masters, err := keyring.ParseMasters(old.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.New(masters, db.DataKeys())
	if err != nil {
		t.Fatal(err)
	}
	clock := testclock.New(old.At)
	runner := db.Runner(clock.Now)
	svc, err := user.NewService(user.Deps{Runner: runner, Events: db.Events(), Outbox: db.Outbox(), Views: db.Views(), Keys: keys}, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	answersAsBefore := func(when string) {
		t.Helper()
		if me, err := svc.Me(ctx, old.AdaToken); err != nil || !me.CreatedAt.Equal(old.Me.CreatedAt) || me.ID != old.Me.ID || me.Email != old.Me.Email {
			t.Errorf("%s: Me = %+v, %v; the release before answered %+v", when, me, err, old.Me)
		}
		sessions, err := svc.Sessions(ctx, old.AdaToken)
		if err != nil || len(sessions) != len(old.Sessions) {
			t.Fatalf("%s: Sessions = %+v, %v; the release before answered %+v", when, sessions, err, old.Sessions)
		}
		for i := range sessions {
			got, want := sessions[i], old.Sessions[i]
			if got.ID != want.ID || !got.StartedAt.Equal(want.StartedAt) || !got.LastUsedAt.Equal(want.LastUsedAt) ||
				!got.ExpiresAt.Equal(want.ExpiresAt) || got.Client != want.Client || got.Current != want.Current {
				t.Errorf("%s: session %+v; the release before answered %+v", when, got, want)
			}
		}
		// Dave's five links were stored at version 1, whose time the
		// limit reads through the upcaster: the sixth waits as long.
		var tooMany *user.TooManyRequestsError
		if err := svc.RequestSignInLink(ctx, old.Dave); !errors.As(err, &tooMany) || tooMany.RetryAfter != old.DaveWait {
			t.Errorf("%s: Dave's sixth link: %v; the release before made him wait %s", when, err, old.DaveWait)
		}
	}
	answersAsBefore("after the upgrade")

	// Every event of the log decodes at its current version.
	var log []eventstore.Event
	err = runner.Read(ctx, func(ctx context.Context, tx uow.Tx) error {
		var err error
		log, err = db.Events().ReadCommitted(ctx, tx, eventstore.Position{}, 1000)
		return err
	})
	if err != nil || len(log) == 0 {
		t.Fatalf("read the log: %d events, %v", len(log), err)
	}
	for _, e := range log {
		if e.SchemaVersion != 1 {
			t.Errorf("%s %s is at schema version %d after the migration, want 1", e.Type, e.ID, e.SchemaVersion)
		}
		if _, err := user.Events().Decode(e); err != nil {
			t.Errorf("decode: %v", err)
		}
	}

	// The views and the activity rebuild from the old log.
	if _, err := projections.Rebuild(ctx, runner, db.Events(), user.ViewsProjection{Views: db.Views(), Keys: keys}); err != nil {
		t.Fatalf("rebuild the views: %v", err)
	}
	answersAsBefore("after a rebuild of the views")
	eventLog := db.Log(async.LogConfig{PollInterval: 10 * time.Millisecond})
	activity := user.ActivityProjection{Store: db.ActivityStore(), Log: eventLog, Keys: keys}
	if _, _, err := async.Renew(ctx, eventLog, activity, nil); err != nil {
		t.Fatalf("rebuild the activity: %v", err)
	}
	items, _, err := activity.Page(ctx, old.Me.ID, nil, 10)
	var types []string
	for _, a := range items {
		types = append(types, a.Type)
	}
	if want := []string{user.ActivityEmailChangeRequested, user.ActivitySignedIn, user.ActivityRegistered}; err != nil || !reflect.DeepEqual(types, want) {
		t.Errorf("Ada's activity rebuilt as %v, %v; want %v", types, err, want)
	}

	// What the release before mailed still works.
	bob, err := svc.SignIn(ctx, old.BobCode)
	if err != nil || bob.User.Email != "bob@example.com" {
		t.Errorf("Bob's link: %+v, %v", bob.User, err)
	}
	if u, err := svc.ConfirmEmailChange(ctx, old.AdaChangeCode, old.AdaToken); err != nil || u.Email != "ada.new@example.com" {
		t.Errorf("Ada's change of address: %+v, %v", u, err)
	}

	// Ada's session, started by the release before (a session_started at
	// version 1), ends by the ID that release listed it under, with an
	// event of this release's version; Bob's, started now, goes on. So
	// do both after the views are rebuilt from the mixed log.
	if err := svc.EndSession(ctx, old.AdaToken, old.Sessions[0].ID); err != nil {
		t.Errorf("Ada ends her session %s: %v", old.Sessions[0].ID, err)
	}
	sessionsAsNow := func(when string) {
		t.Helper()
		if _, err := svc.Me(ctx, old.AdaToken); !errors.Is(err, user.ErrUnauthenticated) {
			t.Errorf("%s: Me with Ada's ended session: %v, want ErrUnauthenticated", when, err)
		}
		if list, err := svc.Sessions(ctx, bob.Token); err != nil || len(list) != 1 || !list[0].Current {
			t.Errorf("%s: Bob's sessions %+v, %v; want his one", when, list, err)
		}
	}
	sessionsAsNow("after Ada's sign-out")
	if _, err := projections.Rebuild(ctx, runner, db.Events(), user.ViewsProjection{Views: db.Views(), Keys: keys}); err != nil {
		t.Fatalf("rebuild the views: %v", err)
	}
	sessionsAsNow("after a rebuild of the views")
}

func readUpgraded(t *testing.T, backend string) upgraded {
	t.Helper()
	var old upgraded
	if err := json.Unmarshal([]byte(dump(t, backend+".json")), &old); err != nil {
		t.Fatal(err)
	}
	return old
}

func dump(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "upgrade", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
