package smtp_test

import (
	"context"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// TestSendTrace holds a send in a trace to one client span, a child of the
// span in its context, that names the server and nothing of the mail, sent
// or refused; the mail carries nothing of the trace.
func TestSendTrace(t *testing.T) {
	t.Parallel()
	m := mail.Mail{
		From: "sender@example.com", To: "ada.lovelace@example.com", Subject: "Your sign-in link",
		MessageID: "0190a3b1-0000-7000-8000-000000000001@accounts.example.com",
		Text:      "https://accounts.example.com/sign-in?code=s3cretc0de",
	}
	secrets := []string{m.To, "ada.lovelace", m.Subject, "s3cretc0de", "sign-in?code"}
	for _, tc := range []struct {
		name    string
		refused bool
	}{{"sent", false}, {"refused", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := smtptest.NewServer(t)
			if tc.refused {
				srv.Refuse(550, "no such user ada.lovelace@example.com")
			}
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			s, err := smtp.New(srv.URL(), 5*time.Second, smtp.WithTracerProvider(tp))
			if err != nil {
				t.Fatal(err)
			}
			ctx, delivery := tp.Tracer("test").Start(t.Context(), "delivery")
			err = s.Send(ctx, m)
			delivery.End()
			if (err != nil) != tc.refused {
				t.Fatalf("Send: %v", err)
			}

			var span sdktrace.ReadOnlySpan
			for _, sp := range rec.Ended() {
				if sp.Parent().SpanID() == delivery.SpanContext().SpanID() {
					span = sp
				}
			}
			if span == nil {
				t.Fatal("no span of the send is a child of the span in ctx")
			}
			if span.SpanKind() != trace.SpanKindClient {
				t.Errorf("span %q of kind %s, want a client span", span.Name(), span.SpanKind())
			}
			var said []string
			said = append(said, span.Name(), span.Status().Description)
			for _, kv := range span.Attributes() {
				said = append(said, string(kv.Key)+"="+kv.Value.Emit())
			}
			for _, ev := range span.Events() {
				said = append(said, ev.Name)
				for _, kv := range ev.Attributes {
					said = append(said, string(kv.Key)+"="+kv.Value.Emit())
				}
			}
			all := strings.Join(said, " ")
			for _, secret := range secrets {
				if strings.Contains(all, secret) {
					t.Errorf("the span repeats %q: %s", secret, all)
				}
			}
			if !strings.Contains(all, "server.address=127.0.0.1") {
				t.Errorf("the span does not name the server: %s", all)
			}
			if tc.refused {
				if span.Status().Code.String() != "Error" {
					t.Errorf("span status %v, want an error", span.Status())
				}
				return
			}
			got := srv.Wait(t, 1, 5*time.Second)
			for k := range got[0].Header {
				if k := strings.ToLower(k); k == "traceparent" || k == "tracestate" {
					t.Errorf("the mail carries the header %s", k)
				}
			}
			if strings.Contains(got[0].Text, delivery.SpanContext().TraceID().String()) {
				t.Error("the mail's text carries the trace ID")
			}
		})
	}
}
