package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// Each request is a server span named for its route, not its path, and a
// child of the caller's span when it carries a W3C traceparent. With
// tracing off there is no span, and the caller's traceparent still reaches
// the command.
func TestRequestSpans(t *testing.T) {
	t.Parallel()
	setup := func(t *testing.T) (http.Handler, *tracetest.SpanRecorder) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
		return httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, TracerProvider: tp}), rec
	}
	only := func(t *testing.T, rec *tracetest.SpanRecorder) sdktrace.ReadOnlySpan {
		t.Helper()
		spans := rec.Ended()
		if len(spans) != 1 {
			t.Fatalf("%d spans, want 1", len(spans))
		}
		return spans[0]
	}
	attr := func(s sdktrace.ReadOnlySpan, key attribute.Key) attribute.Value {
		for _, a := range s.Attributes() {
			if a.Key == key {
				return a.Value
			}
		}
		return attribute.Value{}
	}
	t.Run("NamedForTheRoute", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct{ method, path, name, route string }{
			{"POST", "/v1/sign-in-links", "POST /v1/sign-in-links", "/v1/sign-in-links"},
			{"GET", "/v1/me", "GET /v1/me", "/v1/me"},
			{"GET", "/sign-in?code=abc", "GET /sign-in", "/sign-in"},
			{"GET", "/", "GET /{$}", "/{$}"},
			// A path of no route is the catch-all's, so names stay few.
			{"GET", "/v1/no/such/" + strings.Repeat("x", 20), "GET /", "/"},
		} {
			h, rec := setup(t)
			req := httptest.NewRequest(c.method, c.path, strings.NewReader(`{"email":"ada@example.com"}`))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(httptest.NewRecorder(), req)
			s := only(t, rec)
			if s.Name() != c.name || s.SpanKind() != trace.SpanKindServer {
				t.Errorf("%s %s: span %q of kind %s, want %q of kind server", c.method, c.path, s.Name(), s.SpanKind(), c.name)
			}
			if got := attr(s, "http.route").AsString(); got != c.route {
				t.Errorf("%s %s: http.route %q, want %q", c.method, c.path, got, c.route)
			}
			for _, a := range s.Attributes() {
				if strings.Contains(a.Value.Emit(), "ada@example.com") || strings.Contains(a.Value.Emit(), "code=") {
					t.Errorf("%s %s: attribute %s carries the request's data: %s", c.method, c.path, a.Key, a.Value.Emit())
				}
			}
		}
	})
	t.Run("FollowsAnIncomingTraceparent", func(t *testing.T) {
		t.Parallel()
		h, rec := setup(t)
		req := httptest.NewRequest("GET", "/healthz", nil)
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		h.ServeHTTP(httptest.NewRecorder(), req)
		s := only(t, rec)
		if got := s.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
			t.Errorf("trace %s, want the traceparent's", got)
		}
		if got := s.Parent().SpanID().String(); got != "00f067aa0ba902b7" || !s.Parent().IsRemote() {
			t.Errorf("parent %s (remote %v), want the traceparent's remote 00f067aa0ba902b7", got, s.Parent().IsRemote())
		}
		if got := attr(s, "http.response.status_code").AsInt64(); got != http.StatusOK {
			t.Errorf("http.response.status_code %d, want 200", got)
		}
	})
	t.Run("OffPassesTheTraceparentOn", func(t *testing.T) {
		t.Parallel()
		users := &contextOf{}
		h := httpapi.NewServer(httpapi.Deps{Users: users, TracerProvider: noop.NewTracerProvider()})
		req := httptest.NewRequest("POST", "/v1/sign-in-links", strings.NewReader(`{"email":"ada@example.com"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		rr := httptest.NewRecorder()
		h.ServeHTTP(rr, req)
		sc := users.span
		if rr.Code != http.StatusAccepted || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
			sc.SpanID().String() != "00f067aa0ba902b7" || !sc.IsRemote() || !sc.IsSampled() {
			t.Errorf("tracing off: status %d, the command's span context %v; want 202 and the traceparent's, remote and sampled", rr.Code, sc)
		}
		if span := trace.SpanFromContext(users.ctx); span.IsRecording() {
			t.Error("tracing off: the command runs in a recording span")
		}
	})
}

// contextOf is fakeUsers that keeps the context of the sign-in link
// request it was given.
type contextOf struct {
	fakeUsers
	ctx  context.Context
	span trace.SpanContext
}

func (u *contextOf) RequestSignInLink(ctx context.Context, address string) error {
	u.ctx, u.span = ctx, trace.SpanContextFromContext(ctx)
	return u.fakeUsers.RequestSignInLink(ctx, address)
}
