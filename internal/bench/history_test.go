package bench

import (
	"testing"
	"time"

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
