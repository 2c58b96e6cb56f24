package user_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/postgres"
	"github.com/eventsourced/accounts/internal/postgres/pgtest"
	"github.com/eventsourced/accounts/internal/sqlite"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/testclock"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/mail/mailtest"
)

// traced is a service on one backend whose spans, and the backend's, a
// recorder keeps.
type traced struct {
	deps  user.Deps
	svc   *user.Service
	clock *testclock.Clock
	spans *tracetest.SpanRecorder
	tp    trace.TracerProvider
}

// setupTraced returns a traced service on backend, "PostgreSQL" or
// "SQLite". wrap, when not nil, changes the event store the service uses.
func setupTraced(t *testing.T, backend string, wrap func(eventstore.Store) eventstore.Store) *traced {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	b := &traced{clock: testclock.New(start), spans: rec, tp: tp}
	switch backend {
	case "PostgreSQL":
		db := pgtest.New(t, postgres.WithTracerProvider(tp))
		b.deps = user.Deps{Runner: db.Runner(b.clock.Now), Events: db.Events(), Outbox: db.Outbox(), Views: postgres.UserViews{}, Keys: keyringtest.New(t, postgres.DataKeys{})}
	case "SQLite":
		db := sqlitetest.New(t, sqlite.WithTracerProvider(tp))
		b.deps = user.Deps{Runner: db.Runner(b.clock.Now), Events: db.Events(), Outbox: db.Outbox(), Views: sqlite.UserViews{}, Keys: keyringtest.New(t, sqlite.DataKeys{})}
	default:
		t.Fatalf("no backend %q", backend)
	}
	d := b.deps
	if wrap != nil {
		d.Events = wrap(d.Events)
	}
	svc, err := user.NewService(d, user.Policy{}, baseURL, user.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	b.svc = svc
	return b
}

// code asks for a sign-in link to address and returns its code.
func (b *traced) code(t *testing.T, svc *user.Service, address string) string {
	t.Helper()
	if err := svc.RequestSignInLink(t.Context(), address); err != nil {
		t.Fatal(err)
	}
	sent := mailtest.Take(t, b.deps.Outbox, b.clock.Now().Add(time.Hour))
	if len(sent) != 1 || sent[0].Topic != mail.TopicLoginLink {
		t.Fatalf("mails %+v, want one sign-in link", sent)
	}
	return sent[0].Link.Code
}

// named returns the ended spans named name, in the order they ended.
func (b *traced) named(name string) []sdktrace.ReadOnlySpan {
	var got []sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		if s.Name() == name {
			got = append(got, s)
		}
	}
	return got
}

// childrenOf returns the ended spans whose parent is span.
func (b *traced) childrenOf(span sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var got []sdktrace.ReadOnlySpan
	for _, s := range b.spans.Ended() {
		if s.Parent().SpanID() == span.SpanContext().SpanID() {
			got = append(got, s)
		}
	}
	return got
}

// attr returns the value of the attribute key of span, and whether it has
// one.
func attr(span sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, kv := range span.Attributes() {
		if string(kv.Key) == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// checkNothingOf fails t when the name, status, an attribute or an event
// of any span holds one of secrets.
func checkNothingOf(t *testing.T, spans []sdktrace.ReadOnlySpan, secrets ...string) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Name(), s.Status().Description}
		for _, kv := range s.Attributes() {
			texts = append(texts, string(kv.Key)+"="+kv.Value.Emit())
		}
		for _, e := range s.Events() {
			texts = append(texts, e.Name)
			for _, kv := range e.Attributes {
				texts = append(texts, string(kv.Key)+"="+kv.Value.Emit())
			}
		}
		for _, text := range texts {
			for _, secret := range secrets {
				if secret != "" && strings.Contains(text, secret) {
					t.Errorf("span %q holds %q: %s", s.Name(), secret, text)
				}
			}
		}
	}
}

// Each command and query is one internal span named for it, with the
// number of tries of a command, and of a refusal its type alone; no span
// of the service or of its backend holds an address, a code or a token.
func TestCommandSpans(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"PostgreSQL", "SQLite"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			b := setupTraced(t, backend, nil)
			ctx := t.Context()
			const address = "ada.lovelace@example.com"
			code := b.code(t, b.svc, address)
			s, err := b.svc.SignIn(ctx, code)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.svc.Me(ctx, s.Token); err != nil {
				t.Fatal(err)
			}
			if _, err := b.svc.SignIn(ctx, code); !errors.Is(err, user.ErrInvalidCode) {
				t.Fatalf("a second sign-in with the code: %v, want ErrInvalidCode", err)
			}

			for _, c := range []struct {
				name  string
				n     int
				tries bool
			}{{"user.RequestSignInLink", 1, true}, {"user.SignIn", 2, true}, {"user.Me", 1, false}} {
				spans := b.named(c.name)
				if len(spans) != c.n {
					t.Fatalf("%d spans named %s, want %d", len(spans), c.name, c.n)
				}
				for _, span := range spans {
					if span.SpanKind() != trace.SpanKindInternal {
						t.Errorf("%s: kind %s, want internal", c.name, span.SpanKind())
					}
					if got := span.InstrumentationScope().Name; got != "github.com/eventsourced/accounts/internal/user" {
						t.Errorf("%s: tracer %q, want the package's import path", c.name, got)
					}
					tries, ok := attr(span, "user.command.tries")
					if ok != c.tries || (ok && tries.AsInt64() != 1) {
						t.Errorf("%s: tries %v (set: %t), want 1 on a command and none on a query", c.name, tries.Emit(), ok)
					}
					if len(span.Events()) != 0 {
						t.Errorf("%s: events %+v, want none", c.name, span.Events())
					}
				}
			}
			signIns := b.named("user.SignIn")
			if st := signIns[0].Status(); st.Code != codes.Unset {
				t.Errorf("the sign-in: status %+v, want unset", st)
			}
			refused := signIns[1]
			if st := refused.Status(); st.Code != codes.Error || st.Description != "command refused" {
				t.Errorf("the refused sign-in: status %+v, want an error described as refused", st)
			}
			if typ, _ := attr(refused, "error.type"); typ.AsString() != "user.ErrInvalidCode" {
				t.Errorf("the refused sign-in: error.type %q, want user.ErrInvalidCode", typ.Emit())
			}
			// The backend's spans are children of the command's.
			for _, command := range append(b.named("user.RequestSignInLink"), signIns...) {
				children := b.childrenOf(command)
				if len(children) == 0 {
					t.Fatalf("%s has no span of its backend", command.Name())
				}
				for _, child := range children {
					if child.SpanKind() != trace.SpanKindClient {
						t.Errorf("%s: child %q of kind %s, want client", command.Name(), child.Name(), child.SpanKind())
					}
					switch backend {
					case "PostgreSQL":
						if text, _ := attr(child, "db.query.text"); text.AsString() == "" {
							t.Errorf("%s: statement span %q has no db.query.text", command.Name(), child.Name())
						}
					case "SQLite":
						want := []string{"begun", "commit"}
						if command == refused {
							want = []string{"begun", "rollback"}
						}
						var got []string
						for _, e := range child.Events() {
							got = append(got, e.Name)
						}
						if child.Name() != "sqlite transaction" || strings.Join(got, " ") != strings.Join(want, " ") {
							t.Errorf("%s: child %q with events %v, want a sqlite transaction with %v", command.Name(), child.Name(), got, want)
						}
					}
				}
			}
			checkNothingOf(t, b.spans.Ended(), address, "ada.lovelace", code, s.Token, s.User.ID.String())
		})
	}
}

// racingEvents is an event store whose first LoadSince lets race run, with
// another service, before it returns: a command that then appends after
// what it loaded loses the race to what race appended.
type racingEvents struct {
	eventstore.Store
	once sync.Once
	race func()
}

func (e *racingEvents) LoadSince(ctx context.Context, tx uow.Tx, stream string, since time.Time) ([]eventstore.Event, int64, error) {
	events, version, err := e.Store.LoadSince(ctx, tx, stream, since)
	e.once.Do(e.race)
	return events, version, err
}

// A command that lost a race notes it on its span, with the try that lost,
// and counts its tries; a request for a link whose presumption failed
// notes that too. On PostgreSQL only: on SQLite units of work take turns
// on one connection, and no command loses a race.
func TestCommandSpanCountsLostRaces(t *testing.T) {
	t.Parallel()
	const address = "grace@example.com"
	var b *traced
	racing := &racingEvents{}
	b = setupTraced(t, "PostgreSQL", func(s eventstore.Store) eventstore.Store {
		racing.Store = s
		return racing
	})
	other, err := user.NewService(b.deps, user.Policy{}, baseURL)
	if err != nil {
		t.Fatal(err)
	}
	racing.race = func() {
		if err := other.RequestSignInLink(t.Context(), address); err != nil {
			t.Errorf("the racing request: %v", err)
		}
	}
	// A first request, forgotten by the sweep once it no longer counts:
	// the marker the sweep appends fails the traced request's
	// presumption, so that it loads the address's links, which lets the
	// racer in.
	if err := other.RequestSignInLink(t.Context(), address); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	if n, err := other.ForgetIdleAddresses(t.Context()); err != nil || n != 1 {
		t.Fatalf("ForgetIdleAddresses = %d, %v; want the address forgotten", n, err)
	}
	if err := b.svc.RequestSignInLink(t.Context(), address); err != nil {
		t.Fatal(err)
	}
	spans := b.named("user.RequestSignInLink")
	if len(spans) != 1 {
		t.Fatalf("%d spans of the request, want 1 (the racer's service traces nothing)", len(spans))
	}
	span := spans[0]
	if tries, _ := attr(span, "user.command.tries"); tries.AsInt64() != 3 {
		t.Errorf("tries %s, want 3: presumed, lost the race, won", tries.Emit())
	}
	events := span.Events()
	if len(events) != 2 || events[0].Name != "condition failed" || events[1].Name != "lost race" {
		t.Fatalf("events %+v, want the condition failed, then one lost race", events)
	}
	if len(events[1].Attributes) != 1 || events[1].Attributes[0] != attribute.Int("user.command.try", 2) {
		t.Errorf("the lost race's attributes %v, want user.command.try=2", events[1].Attributes)
	}
	if st := span.Status(); st.Code != codes.Unset {
		t.Errorf("status %+v, want unset: the command succeeded at its third try", st)
	}
	checkNothingOf(t, b.spans.Ended(), address, "grace")
}

// panickingEvents is an event store whose LoadSince and AppendLaterIf
// panic.
type panickingEvents struct{ eventstore.Store }

func (panickingEvents) LoadSince(context.Context, uow.Tx, string, time.Time) ([]eventstore.Event, int64, error) {
	panic("the event store broke")
}

func (panickingEvents) AppendLaterIf(context.Context, uow.Tx, string, eventstore.Condition, ...eventstore.Event) ([]eventstore.Event, error) {
	panic("the event store broke")
}

// A command that panics ends its span as failed before the panic goes on,
// so that no span stays open behind the HTTP server's recovery.
func TestCommandSpanEndsWhenTheCommandPanics(t *testing.T) {
	t.Parallel()
	b := setupTraced(t, "SQLite", func(s eventstore.Store) eventstore.Store { return panickingEvents{s} })
	func() {
		defer func() {
			if p := recover(); p != "the event store broke" {
				t.Errorf("recovered %v, want the event store's panic", p)
			}
		}()
		_ = b.svc.RequestSignInLink(t.Context(), "ada@example.com")
	}()
	spans := b.named("user.RequestSignInLink")
	if len(spans) != 1 || spans[0].Status().Code != codes.Error {
		t.Fatalf("%d ended spans of the command, want 1 that failed", len(spans))
	}
}

// Each sweep is one trace: a span of the job, with how much it did, over
// the spans of its units of work.
func TestSweepSpans(t *testing.T) {
	t.Parallel()
	b := setupTraced(t, "SQLite", nil)
	ctx := t.Context()
	for _, job := range []struct {
		name string
		run  func(context.Context) (int64, error)
	}{
		{"user.Sweep", b.svc.Sweep},
		{"user.ForgetIdleAddresses", b.svc.ForgetIdleAddresses},
		{"user.ForgetSettledChanges", b.svc.ForgetSettledChanges},
	} {
		if _, err := job.run(ctx); err != nil {
			t.Fatalf("%s: %v", job.name, err)
		}
		spans := b.named(job.name)
		if len(spans) != 1 {
			t.Fatalf("%d spans named %s, want 1", len(spans), job.name)
		}
		span := spans[0]
		if done, ok := attr(span, "user.job.done"); !ok || done.AsInt64() != 0 {
			t.Errorf("%s: user.job.done %s (set: %t), want 0", job.name, done.Emit(), ok)
		}
		batches := b.named(job.name + " batch")
		if len(batches) == 0 {
			t.Fatalf("%s ran no batch", job.name)
		}
		for _, batch := range batches {
			if batch.Parent().SpanID() != span.SpanContext().SpanID() {
				t.Errorf("%s: a batch is not a child of the job's span", job.name)
			}
		}
	}
}
