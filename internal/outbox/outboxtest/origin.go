package outboxtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/uow"
)

// originCtx returns a context under a span of trace n, with a tracestate,
// and with request ID req.
func originCtx(t *testing.T, n byte, req string) (context.Context, trace.SpanContext) {
	t.Helper()
	ts, err := trace.ParseTraceState(fmt.Sprintf("vendor=v%d,other=x", n))
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, n},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, n},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
	})
	return trace.ContextWithSpanContext(requestid.With(t.Context(), req), sc), sc
}

// addIn adds msgs in one committed unit of work run under ctx.
func (s suite) addIn(t *testing.T, ctx context.Context, msgs ...outbox.Message) {
	t.Helper()
	err := s.Runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		return s.Store.Add(ctx, tx, msgs...)
	})
	if err != nil {
		t.Fatalf("add %d messages: %v", len(msgs), err)
	}
}

// checkOrigin fails the test unless got is the origin of a message added
// under a span of want's trace (the unit of work may add a span of its
// own to that trace) and with request ID req.
func checkOrigin(t *testing.T, what string, got outbox.Origin, want trace.SpanContext, req string) {
	t.Helper()
	sc := got.SpanContext()
	if !sc.IsValid() || sc.TraceID() != want.TraceID() || sc.TraceFlags() != want.TraceFlags() ||
		sc.TraceState().String() != want.TraceState().String() || !sc.IsRemote() {
		t.Errorf("%s: origin %+v names span context %+v, want one of trace %s, flags %s, tracestate %q",
			what, got, sc, want.TraceID(), want.TraceFlags(), want.TraceState())
	}
	if got.RequestID != req {
		t.Errorf("%s: origin request ID %q, want %q", what, got.RequestID, req)
	}
}

// Origin: "ClaimWithOrigins returns each message with the Origin that ctx
// gave it when it was added": the messages of one Add share theirs, those
// of another Add have their own, and the operators' views show it.
func testOriginRoundTrips(t *testing.T, s suite) {
	ctx1, sc1 := originCtx(t, 1, "req-one")
	ctx2, sc2 := originCtx(t, 2, "0f8fad5b-d9cb-469f-a165-70867728950e")
	a := s.msg(t, "test.origin", map[string]int{"n": 1}, base)
	b := s.msg(t, "test.origin", map[string]int{"n": 2}, base.Add(time.Millisecond))
	c := s.msg(t, "test.origin", map[string]int{"n": 3}, base.Add(2*time.Millisecond))
	c.Key = "k"
	s.addIn(t, ctx1, a, b)
	s.addIn(t, ctx2, c)

	got, err := s.Store.ClaimWithOrigins(t.Context(), base.Add(time.Hour), lease, 10)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		msg outbox.Message
		sc  trace.SpanContext
		req string
	}{a.ID.String(): {a, sc1, "req-one"}, b.ID.String(): {b, sc1, "req-one"}, c.ID.String(): {c, sc2, "0f8fad5b-d9cb-469f-a165-70867728950e"}}
	if len(got) != len(want) {
		t.Fatalf("ClaimWithOrigins returned %d messages, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[g.ID.String()]
		if g.ID != []outbox.Message{a, b, c}[i].ID {
			t.Errorf("claimed #%d is %s, want the order of Claim: a, b, c", i, g.ID)
		}
		checkMessage(t, g.Message, w.msg, 1)
		checkOrigin(t, "claimed "+g.ID.String(), g.Origin, w.sc, w.req)
	}
	rec, err := s.Store.Lookup(t.Context(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	checkOrigin(t, "Lookup", rec.Origin, sc2, "0f8fad5b-d9cb-469f-a165-70867728950e")
}

// Origin: a message added outside any span and request has the zero
// Origin, and so has one added under a span context that is not valid;
// a request ID alone is kept alone.
func testOriginEmpty(t *testing.T, s suite) {
	none := s.msg(t, "test.origin", nil, base)
	s.add(t, none)
	invalid := s.msg(t, "test.origin", nil, base.Add(time.Millisecond))
	s.addIn(t, trace.ContextWithSpanContext(t.Context(), trace.SpanContext{}), invalid)
	onlyReq := s.msg(t, "test.origin", nil, base.Add(2*time.Millisecond))
	s.addIn(t, requestid.With(t.Context(), "req-alone"), onlyReq)

	got, err := s.Store.ClaimWithOrigins(t.Context(), base.Add(time.Hour), lease, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("ClaimWithOrigins returned %d messages, want 3", len(got))
	}
	for _, g := range got[:2] {
		if !g.Origin.IsZero() {
			t.Errorf("message %s added without span or request: origin %+v, want none", g.ID, g.Origin)
		}
	}
	if o := got[2].Origin; o != (outbox.Origin{RequestID: "req-alone"}) {
		t.Errorf("message added with a request ID only: origin %+v, want that ID alone", o)
	}
}

// Origin: a message keeps its origin through a retry, a burial, a
// redaction of its payload and a requeue; it holds no personal data, so
// none of those touch it.
func testOriginKept(t *testing.T, s suite) {
	ctx, sc := originCtx(t, 3, "req-kept")
	m := s.msg(t, "test.origin", map[string]string{"to": "a@example.com", "n": "1"}, base)
	s.addIn(t, ctx, m)
	claim := func(at time.Time, attempts int) {
		t.Helper()
		got, err := s.Store.ClaimWithOrigins(t.Context(), at, lease, 10)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].ID != m.ID || got[0].Attempts != attempts {
			t.Fatalf("ClaimWithOrigins at %s = %+v, want %s at attempt %d", at, got, m.ID, attempts)
		}
		checkOrigin(t, fmt.Sprintf("claim at attempt %d", attempts), got[0].Origin, sc, "req-kept")
	}
	claim(base, 1)
	s.retry(t, m.ID, base.Add(time.Minute), "421 busy")
	claim(base.Add(time.Minute), 2)
	s.bury(t, m.ID, "550 gone")
	if _, err := s.Store.RedactBuried(t.Context(), "test.origin", []string{"to"}, farFuture); err != nil {
		t.Fatal(err)
	}

	if err := s.Store.Requeue(t.Context(), m.ID, base.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	claim(base.Add(time.Hour), 1)
}
