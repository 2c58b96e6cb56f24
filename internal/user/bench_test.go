package user_test

import (
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/mail/mailtest"
)

// pastSessions is how many sign-ins the old account of the benchmarks has
// behind it.
const pastSessions = 3000

// BenchmarkHistory sets a new account beside one with 3,000 past
// sessions over 31 days (every other one ended, the first ones expired,
// the rest live), on each backend, and times
// what a signed-in person does with each: GET /v1/me's Me, a sign-in, and a
// sign-out. The cost must not grow with the history:
//
//	go test -run '^$' -bench BenchmarkHistory -benchtime 2000x ./internal/user/
func BenchmarkHistory(b *testing.B) {
	for _, name := range []string{"PostgreSQL", "SQLite"} {
		b.Run(name, func(b *testing.B) {
			clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			d := benchDeps(b, name, clock)
			svc, err := user.NewService(d, user.Policy{}, baseURL)
			if err != nil {
				b.Fatal(err)
			}
			signIn := func(email string) user.Session { return signInOnce(b, svc, d, clock, email) }
			// The old account: a sign-in every 15 minutes, within the
			// limit, every other one ended.
			var old user.Session
			for i := range pastSessions {
				old = signIn("old@example.com")
				if i%2 == 0 && i < pastSessions-1 {
					if err := svc.SignOut(b.Context(), old.Token); err != nil {
						b.Fatal(err)
					}
				}
				clock.Advance(15 * time.Minute)
			}
			fresh := signIn("new@example.com")
			clock.Advance(time.Hour)
			for _, who := range []struct {
				name    string
				email   string
				session user.Session
			}{{"old", "old@example.com", old}, {"new", "new@example.com", fresh}} {
				b.Run("Me/"+who.name, func(b *testing.B) {
					for b.Loop() {
						if _, err := svc.Me(b.Context(), who.session.Token); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run("SignInAndOut/"+who.name, func(b *testing.B) {
					for b.Loop() {
						b.StopTimer()
						if err := svc.RequestSignInLink(b.Context(), who.email); err != nil {
							b.Fatal(err)
						}
						sent := mailtest.Take(b, d.Outbox, clock.Now().Add(time.Hour))
						clock.Advance(4 * time.Minute) // Within the limit, however many runs.
						b.StartTimer()
						s, err := svc.SignIn(b.Context(), sent[0].Link.Code)
						if err != nil {
							b.Fatal(err)
						}
						if err := svc.SignOut(b.Context(), s.Token); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// benchDeps returns the dependencies of a service on a new database of
// backend ("PostgreSQL" or "SQLite"), whose units of work read clock.
func benchDeps(b *testing.B, backend string, clock *testclock.Clock) user.Deps {
	b.Helper()
	if backend == "PostgreSQL" {
		db := pgtest.New(b)
		return user.Deps{Runner: db.Runner(clock.Now), Events: db.Events(), Outbox: db.Outbox(), Views: postgres.UserViews{}, Keys: keyringtest.New(b, postgres.DataKeys{})}
	}
	db := sqlitetest.New(b)
	return user.Deps{Runner: db.Runner(clock.Now), Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{}, Keys: keyringtest.New(b, sqlite.DataKeys{})}
}

// signInOnce signs email in through the service, as a person does.
func signInOnce(b *testing.B, svc *user.Service, d user.Deps, clock *testclock.Clock, email string) user.Session {
	b.Helper()
	if err := svc.RequestSignInLink(b.Context(), email); err != nil {
		b.Fatal(err)
	}
	sent := mailtest.Take(b, d.Outbox, clock.Now().Add(time.Hour))
	if len(sent) != 1 || sent[0].Topic != mail.TopicLoginLink {
		b.Fatalf("mails %+v, want one sign-in link", sent)
	}
	s, err := svc.SignIn(b.Context(), sent[0].Link.Code)
	if err != nil {
		b.Fatal(err)
	}
	return s
}
