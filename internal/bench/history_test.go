package bench

import (
	"context"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// The history holds exactly the events asked for, each stream numbered
// without a version twice, with the mix of a service whose sweep runs.
func TestHistory(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, n := range []int{1, 100, 20000} {
		h := newHistory(7, "h", n, now)
		seen := map[string]map[int64]bool{}
		types := map[string]int{}
		total := 0
		for {
			batch := h.next(1000)
			if len(batch) == 0 {
				break
			}
			for _, s := range batch {
				total++
				types[s.typ]++
				if seen[s.stream] == nil {
					seen[s.stream] = map[int64]bool{}
				}
				if s.version < 1 || seen[s.stream][s.version] {
					t.Fatalf("n=%d: %s version %d given twice or below 1", n, s.stream, s.version)
				}
				seen[s.stream][s.version] = true
				if s.at.After(now) {
					t.Fatalf("n=%d: event at %s, after the history's end", n, s.at)
				}
			}
		}
		if total != n {
			t.Errorf("n=%d: the history holds %d events", n, total)
		}
		if n < 20000 {
			continue
		}
		for _, typ := range []string{user.TypeRegistered, user.TypeSessionStarted, user.TypeSessionEnded,
			user.TypeEmailChangeRequested, user.TypeEmailChanged, user.TypeSignInForgotten} {
			if types[typ] == 0 {
				t.Errorf("n=%d: no event of type %s in %v", n, typ, types)
			}
		}
		if types[user.TypeSignInForgotten] > n/3 {
			t.Errorf("n=%d: %d markers of forgotten sign-ins, more than a third of the log: %v", n, types[user.TypeSignInForgotten], types)
		}
	}
}

// TestHistoryNamesTheCommandOfEveryType: the history's events carry the
// metadata the service's commands write, so every registered type needs
// the command that appends it.
func TestHistoryNamesTheCommandOfEveryType(t *testing.T) {
	for _, typ := range user.Events().Types() {
		if causes[typ] == "" {
			t.Errorf("the history names no command that appends %s: add it to causes", typ)
		}
	}
}

// The history's events are those the service writes: each at its type's
// current version, as the registry makes them, and decoded by the log's
// readers as they are; the session events, most of the log, name their
// account by their stream.
func TestHistoryWritesCurrentVersions(t *testing.T) {
	t.Parallel()
	db := sqlitetest.New(t)
	value, err := keyring.NewMasterKey("history")
	if err != nil {
		t.Fatal(err)
	}
	masters, err := keyring.ParseMasters(value)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := keyring.New(masters, db.DataKeys())
	if err != nil {
		t.Fatal(err)
	}
	h := newHistory(7, "h", 5000, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	types := map[string]int{}
	err = db.Runner(nil).Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		ctx = keyring.Within(ctx, tx)
		for specs := h.next(1000); len(specs) > 0; specs = h.next(1000) {
			for _, s := range specs {
				e, err := s.event(ctx, tx, keys)
				if err != nil {
					return err
				}
				types[e.Type]++
				if v := user.Events().Version(e.Type); e.SchemaVersion != v {
					t.Errorf("%s %s at version %d, want %d", e.Type, e.ID, e.SchemaVersion, v)
				}
				if _, err := user.Events().Decode(e); err != nil {
					t.Errorf("decode: %v", err)
				}
				if e.Type == user.TypeSessionStarted || e.Type == user.TypeSessionEnded {
					if id, err := user.UserOf(e); err != nil || e.Stream != "user-"+s.account.id.String() {
						t.Errorf("%s %s in %s: account %s, %v; want %s", e.Type, e.ID, e.Stream, id, err, s.account.id)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if types[user.TypeSessionStarted] == 0 || types[user.TypeSessionEnded] == 0 {
		t.Errorf("no session events in the history: %v", types)
	}
}
