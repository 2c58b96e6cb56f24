package user_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// BenchmarkLoadStream times the load of a user stream of 10, 1,000 and
// 100,000 events, on each backend, two ways:
//
//   - tail: as the domain loads it for every command (Service.loadTail):
//     the events of the last LinkWindow or LinkTTL, whichever is longer,
//     and the stream's version, then each event decoded as the fold
//     decodes it. The history lies before the window; a sign-in a moment
//     ago lies in it, as it does for a person who signed in to act.
//   - whole: every event from the first, decoded: what an erasure reads,
//     and what a load without a window, or a snapshot, would cost.
//
// It tells whether a stream's length reaches its commands, and so whether
// snapshots would pay:
//
//	go test -run '^$' -bench BenchmarkLoadStream -benchtime 200x ./internal/user/
func BenchmarkLoadStream(b *testing.B) {
	for _, backend := range []string{"PostgreSQL", "SQLite"} {
		b.Run(backend, func(b *testing.B) {
			clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			d := benchDeps(b, backend, clock)
			svc, err := user.NewService(d, user.Policy{}, baseURL)
			if err != nil {
				b.Fatal(err)
			}
			window := user.Policy{}.WithDefaults()
			since := max(window.LinkWindow, window.LinkTTL)
			for _, length := range []int{10, 1000, 100000} {
				email := fmt.Sprintf("load-%d@example.com", length)
				id := signInOnce(b, svc, d, clock, email).User.ID
				stream := "user-" + id.String()
				// The history: sessions started and ended, a day before.
				appendSessions(b, d, stream, length-3)
				clock.Advance(24 * time.Hour)
				signInOnce(b, svc, d, clock, email) // the session that acts: the stream's length-th event
				clock.Advance(time.Minute)
				loads := map[string]func(ctx context.Context, tx uow.Tx) ([]eventstore.Event, error){
					"tail": func(ctx context.Context, tx uow.Tx) ([]eventstore.Event, error) {
						events, _, err := d.Events.LoadSince(ctx, tx, stream, tx.Now().Add(-since))
						return events, err
					},
					"whole": func(ctx context.Context, tx uow.Tx) ([]eventstore.Event, error) {
						return d.Events.Load(ctx, tx, stream, 0)
					},
				}
				for _, how := range []string{"tail", "whole"} {
					b.Run(fmt.Sprintf("%s/events=%d", how, length), func(b *testing.B) {
						var n int
						for b.Loop() {
							err := d.Runner.Read(b.Context(), func(ctx context.Context, tx uow.Tx) error {
								events, err := loads[how](ctx, tx)
								if err != nil {
									return err
								}
								n = len(events)
								return decodeAll(events)
							})
							if err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(float64(n), "events/load")
					})
				}
			}
		})
	}
}

// appendSessions appends n events of sessions started and ended to the
// stream of an account, a thousand a unit of work, at their types'
// current versions, as the service writes them.
func appendSessions(b *testing.B, d user.Deps, stream string, n int) {
	b.Helper()
	for start := 0; start < n; start += 1000 {
		err := d.Runner.Do(b.Context(), func(ctx context.Context, tx uow.Tx) error {
			events := make([]eventstore.Event, 0, 1000)
			for i := start; i < min(start+1000, n); i++ {
				hash, err := user.ParseTokenHash(fmt.Sprintf("%064x", i/2))
				if err != nil {
					return err
				}
				data := any(user.SessionStarted{TokenHash: hash, ExpiresAt: tx.Now().Add(time.Hour), Client: "Firefox on Linux"})
				if i%2 == 1 {
					data = user.SessionEnded{TokenHash: hash}
				}
				e, err := user.Events().New(data, eventstore.Metadata{})
				if err != nil {
					return err
				}
				events = append(events, e)
			}
			_, err := d.Events.Append(ctx, tx, stream, eventstore.Any, events...)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// decodeAll decodes each event into its type, as the folds do.
func decodeAll(events []eventstore.Event) error {
	for _, e := range events {
		var err error
		switch e.Type {
		case user.TypeRegistered:
			_, err = user.Decode[user.Registered](e)
		case user.TypeSessionStarted:
			_, err = user.Decode[user.SessionStarted](e)
		case user.TypeSessionEnded:
			_, err = user.Decode[user.SessionEnded](e)
		default:
			err = fmt.Errorf("no decoder for %s", e.Type)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
