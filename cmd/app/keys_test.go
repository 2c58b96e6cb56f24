package main

import (
	"context"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/uow"
)

// An operator makes a new master key, puts it before the old one in
// DATA_KEY, and rotates: every data key is then wrapped by the new one, and
// the old one can go.
func TestKeysNewAndRotate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "accounts.db")
	env := map[string]string{"DATABASE_URL": "sqlite:" + path}
	if _, err := runApp(t, t.Context(), env, "migrate"); err != nil {
		t.Fatal(err)
	}
	newKey := func(id string) string {
		t.Helper()
		out, err := runApp(t, t.Context(), env, "keys", "new", "--id", id)
		if err != nil {
			t.Fatal(err)
		}
		value := strings.TrimSpace(out)
		if _, err := keyring.ParseMasters(value); err != nil || !strings.HasPrefix(value, id+":") {
			t.Fatalf("keys new --id %s printed %q: %v", id, value, err)
		}
		return value
	}
	// Without DATA_KEY, SQLite gets a key file beside the database.
	if out, err := runApp(t, t.Context(), env, "keys", "rotate"); err != nil || out != "rewrapped 0 data keys with master key local\n" {
		t.Errorf("keys rotate without DATA_KEY: %q, %v; want the key file's key", out, err)
	}
	if info, err := os.Stat(path + ".key"); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("the key file beside the database: %v, %v; want it, 0600", info, err)
	}
	if _, err := runApp(t, t.Context(), map[string]string{"DATABASE_URL": pgtest.NewURL(t)}, "keys", "rotate"); err == nil || !strings.Contains(err.Error(), "DATA_KEY: required with PostgreSQL") {
		t.Errorf("keys rotate on PostgreSQL without DATA_KEY: %v, want DATA_KEY required", err)
	}
	oldKey, freshKey := newKey("old"), newKey("new")
	if oldKey == freshKey {
		t.Fatal("keys new printed the same key twice")
	}
	if _, err := runApp(t, t.Context(), env, "keys", "new", "--id", "Bad ID"); err == nil {
		t.Error("keys new with a bad ID: accepted")
	}

	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ring := func(dataKey string) *keyring.Keyring {
		t.Helper()
		m, err := keyring.ParseMasters(dataKey)
		if err != nil {
			t.Fatal(err)
		}
		k, err := keyring.New(m, sqlite.DataKeys{})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	old := ring(oldKey)
	sealed := map[string]string{}
	for _, s := range []string{"user:1", "user:2", "user:3"} {
		if err := db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			var err error
			sealed[s], err = old.Seal(ctx, tx, s, s+"@example.com")
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}

	env["DATA_KEY"] = freshKey + "," + oldKey
	out, err := runApp(t, t.Context(), env, "keys", "rotate")
	if err != nil || out != "rewrapped 3 data keys with master key new\n" {
		t.Fatalf("keys rotate: %q, %v", out, err)
	}
	if out, err := runApp(t, t.Context(), env, "keys", "rotate"); err != nil || out != "rewrapped 0 data keys with master key new\n" {
		t.Errorf("keys rotate again: %q, %v; want nothing left", out, err)
	}
	onlyNew := ring(freshKey)
	for s, v := range sealed {
		if err := db.Runner(nil).Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			got, ok, err := onlyNew.Open(ctx, tx, s, v)
			if err == nil && (!ok || got != s+"@example.com") {
				t.Errorf("Open(%s) with only the new key = %q, %v", s, got, ok)
			}
			return err
		}); err != nil {
			t.Errorf("Open(%s) with only the new key: %v", s, err)
		}
	}
	env["DATA_KEY"] = "new:nonsense"
	if out, err := runApp(t, t.Context(), env, "keys", "rotate"); err == nil || strings.Contains(err.Error()+out, "nonsense") {
		t.Errorf("keys rotate with a bad DATA_KEY: %q, %v; want an error that does not show the key", out, err)
	}
}

// serve stops at its start, naming the master keys the database needs,
// when DATA_KEY cannot open the personal data there: a key of another ID,
// another key under the right ID, or the old key alone after a rotation.
// Each would otherwise start, answer /readyz, and fail every sign-in.
func TestServeChecksDataKeyAtStart(t *testing.T) {
	t.Parallel()
	for name, url := range testDatabases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			key := func(id string) string {
				t.Helper()
				v, err := keyring.NewMasterKey(id)
				if err != nil {
					t.Fatal(err)
				}
				return v
			}
			k1, k2, otherK1 := key("k1"), key("k2"), key("k1")
			// The relay is off: these starts need no mail.
			env := map[string]string{"DATABASE_URL": url(t), "HTTP_ADDR": "127.0.0.1:0", "RELAY": "false", "DATA_KEY": k1}
			with := func(dataKey string) map[string]string {
				e := maps.Clone(env)
				e["DATA_KEY"] = dataKey
				return e
			}
			app := e2eStart(t, env)
			app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"ada@example.com"}`, http.StatusAccepted, nil)
			app.stop(t)

			refused := func(what, dataKey, needed string) {
				t.Helper()
				// A serve that listens is stopped, and fails the test.
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				listening := &signalWriter{want: "http listening", seen: make(chan struct{})}
				go func() {
					select {
					case <-listening.seen:
						t.Errorf("serve with %s listened", what)
						cancel()
					case <-ctx.Done():
					}
				}()
				err := run(ctx, []string{"serve"}, getenv(with(dataKey)), io.Discard, listening)
				if err == nil || !strings.Contains(err.Error(), "DATA_KEY") || !strings.Contains(err.Error(), "need the master keys "+needed+" ") {
					t.Errorf("serve with %s: %v; want an error naming DATA_KEY and the master keys %s", what, err, needed)
				}
			}
			refused("a key of another ID", k2, "k1")
			refused("another key under the ID k1", otherK1, "k1")
			if out, err := runApp(t, t.Context(), with(k2+","+k1), "keys", "rotate"); err != nil || !strings.HasPrefix(out, "rewrapped ") {
				t.Fatalf("keys rotate: %q, %v", out, err)
			}
			refused("the old key alone after a rotation", k1, "k2")
			app = e2eStart(t, with(k2))
			app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"ada@example.com"}`, http.StatusAccepted, nil)
			app.stop(t)
		})
	}
}
