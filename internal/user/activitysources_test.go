package user_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// source is a source of activity that makes the rows rows returns of the
// events of its types.
type source struct {
	types []string
	rows  func(events []eventstore.Event) []user.ActivityRow
}

func (s source) ActivityTypes() []string { return s.types }

func (s source) Activity(_ context.Context, _ uow.Tx, events []eventstore.Event) ([]user.ActivityRow, error) {
	return s.rows(events), nil
}

// rowOf returns a row of the account id at e.
func rowOf(id uuid.UUID, e eventstore.Event) user.ActivityRow {
	return user.ActivityRow{UserID: id, Activity: user.Activity{Type: "thing", At: e.RecordedAt, Position: e.Position}}
}

// TestActivitySources: the activity follows its sources' types beside its
// own, and refuses, before it writes anything, a source that claims a
// type of the accounts' or another source's, and rows that are not of an
// account, not at the position and time of an event the source was
// given, or a second of one account at one event, which the store would
// leave out.
func TestActivitySources(t *testing.T) {
	t.Parallel()
	at := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	thing := eventstore.Event{ID: uuid.New(), Type: "test.thing", RecordedAt: at, Position: eventstore.Position{Commit: 7, Seq: 1}}
	other := eventstore.Event{ID: uuid.New(), Type: "test.other", RecordedAt: at, Position: eventstore.Position{Commit: 7, Seq: 2}}
	id := uuid.New()
	each := func(events []eventstore.Event) []user.ActivityRow {
		var out []user.ActivityRow
		for _, e := range events {
			out = append(out, rowOf(id, e))
		}
		return out
	}

	t.Run("Types", func(t *testing.T) {
		t.Parallel()
		p := user.ActivityProjection{Sources: []user.ActivitySource{
			source{types: []string{"test.thing", "test.other"}}, source{types: []string{"a.first"}},
		}}
		want := slices.Sorted(slices.Values(append(user.ActivityTypes(), "test.thing", "test.other", "a.first")))
		if got := p.Types(); !slices.Equal(got, want) {
			t.Errorf("Types() = %v, want %v", got, want)
		}
	})

	for _, c := range []struct {
		name    string
		sources []user.ActivitySource
		want    string
	}{
		{"AccountsType", []user.ActivitySource{source{types: []string{user.TypeRegistered}, rows: each}}, "an event type of the accounts' own"},
		{"TwoSourcesOfAType", []user.ActivitySource{source{types: []string{"test.thing"}, rows: each}, source{types: []string{"test.thing"}, rows: each}}, "two sources"},
		{"RowOfNoAccount", []user.ActivitySource{source{types: []string{"test.thing"}, rows: func(events []eventstore.Event) []user.ActivityRow {
			return []user.ActivityRow{rowOf(uuid.Nil, events[0])}
		}}}, "no account"},
		{"RowAtAnotherEvent", []user.ActivitySource{source{types: []string{"test.thing"}, rows: func([]eventstore.Event) []user.ActivityRow {
			return []user.ActivityRow{rowOf(id, other)}
		}}}, "the position of none of the events it was given"},
		{"TwoRowsOfAnAccountAtAnEvent", []user.ActivitySource{source{types: []string{"test.thing"}, rows: func(events []eventstore.Event) []user.ActivityRow {
			return []user.ActivityRow{rowOf(id, events[0]), rowOf(id, events[0])}
		}}}, "two rows of"},
		{"RowAtAnotherTime", []user.ActivitySource{source{types: []string{"test.thing"}, rows: func(events []eventstore.Event) []user.ActivityRow {
			r := rowOf(id, events[0])
			r.At = r.At.Add(time.Second)
			return []user.ActivityRow{r}
		}}}, "not at the event's time"},
	} {
		t.Run("Refuses"+c.name, func(t *testing.T) {
			t.Parallel()
			// No store: the projection must refuse before it writes.
			p := user.ActivityProjection{Sources: c.sources}
			err := p.Apply(t.Context(), nil, thing, other)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Apply: %v, want an error that says %q", err, c.want)
			}
		})
	}
}
