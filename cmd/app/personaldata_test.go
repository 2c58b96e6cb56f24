package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/eventsourced/accounts/internal/dbdump"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// TestLogsSpansAndStoredErrorsKeepNoPersonalData runs the whole app on
// each backend with JSON logs at every level, every trace exported over
// OTLP to a receiver of the test, and a mail server that refuses a
// recipient with a reply that quotes the address, then cannot be reached
// at all until that mail is buried. A person opens each link, signs in,
// changes their address, is refused a few times and deletes their
// account. Then no log line, no exported span (names, attributes, events,
// links, status, scope, resource) and no stored row holds any of the
// addresses, codes or tokens the test saw, and no log line an SQL
// parameter; only the buried mail's own payload, which an operator may
// requeue, and its unused code's row name its recipient.
//
// The OTLP exporter reads the process's environment, so the test sets it
// and runs alone, its backends one after the other.
func TestLogsSpansAndStoredErrorsKeepNoPersonalData(t *testing.T) {
	for _, name := range []string{"PostgreSQL", "SQLite"} {
		t.Run(name, func(t *testing.T) { personalData(t, e2eDatabases[name](t)) })
	}
}

// The addresses of the test: each local part is unique, so a search for
// it finds the address in any case, escaped or encoded.
const (
	pdFirst  = "pd.first"  // the account's first address
	pdSecond = "pd.second" // the address it changes to
	pdBuried = "pd.buried" // asks for a link the server refuses
	pdBad    = "pd.bad"    // is no address

	pdBadCode = "aaaabbbbccccddddeeeeffffgggghhhh" // signs nobody in
)

func personalData(t *testing.T, database e2eDatabase) {
	rc := startOTLPReceiver(t)
	mx := smtptest.NewServer(t)
	otel := map[string]string{
		"OTEL_TRACES_EXPORTER":        "otlp",
		"OTEL_EXPORTER_OTLP_ENDPOINT": rc.url,
		"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
		"OTEL_TRACES_SAMPLER":         "always_on",
	}
	vars := database.mailing(mx, map[string]string{
		"SMTP_TIMEOUT":        "2s",
		"LOG_FORMAT":          "json",
		"LOG_LEVEL":           "DEBUG-4", // Watermill's trace level, its lowest.
		"OUTBOX_INTERVAL":     "100ms",
		"OUTBOX_MAX_ATTEMPTS": "3", // Buried within seconds: backoff 1s, 2s.
		"SWEEP_INTERVAL":      "0",
	})
	for k, v := range otel {
		t.Setenv(k, v)
		vars[k] = v
	}
	app := e2eStart(t, vars)
	// Secrets are what must not be seen: the local parts of the addresses,
	// and each code and token as the test meets it.
	secrets := []string{pdFirst, pdSecond, pdBuried, pdBad, pdBadCode}
	mails := &e2eMails{mx: mx}
	mailed := func(to, path string) string {
		t.Helper()
		code := mails.nextCode(t, to, path)
		secrets = append(secrets, code)
		// The person opens the link, whose page does not use the code up.
		resp, err := app.client.Get(app.base + path + "?code=" + code)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return code
	}

	// Sign in, as written by hand: the address is normalised.
	app.expect(t, "POST", "/v1/sign-in-links", "", `{"email":"PD.First@Example.com"}`, http.StatusAccepted, nil)
	var session struct {
		Token string `json:"token"`
	}
	app.expect(t, "POST", "/v1/sessions", "", e2eJSON(t, map[string]string{"code": mailed(pdFirst+"@example.com", "/sign-in")}), http.StatusCreated, &session)
	secrets = append(secrets, session.Token)
	app.expect(t, "GET", "/v1/me", session.Token, "", http.StatusOK, nil)

	// Change the address.
	app.expect(t, "POST", "/v1/me/email-change", session.Token, e2eJSON(t, map[string]string{"new_email": pdSecond + "@example.com"}), http.StatusAccepted, nil)
	app.expect(t, "POST", "/v1/email-changes", session.Token, e2eJSON(t, map[string]string{"code": mailed(pdSecond+"@example.com", "/confirm-email")}), http.StatusOK, nil)
	mailed(pdFirst+"@example.com", "/undo-email")
	app.expect(t, "GET", "/v1/me/activity", session.Token, "", http.StatusOK, nil)

	// Refusals, whose errors quote what was asked for.
	app.expect(t, "POST", "/v1/sign-in-links", "", e2eJSON(t, map[string]string{"email": pdBad + "@@example.com"}), http.StatusBadRequest, nil)
	app.expect(t, "POST", "/v1/me/email-change", session.Token, e2eJSON(t, map[string]string{"new_email": pdSecond + "@example.com"}), http.StatusConflict, nil)
	app.expect(t, "POST", "/v1/sessions", "", `{"code":"`+pdBadCode+`"}`, http.StatusUnauthorized, nil)

	// A link to another address: the server refuses its recipient for now,
	// quoting it, then cannot be reached until the mail is buried.
	retried := app.logs.seen(`"msg":"outbox: delivery failed, will retry"`)
	buried := app.logs.seen(`"msg":"outbox: message buried"`)
	mx.Refuse(450, "4.1.1 <"+pdBuried+"@example.com>: no such user here yet")
	app.expect(t, "POST", "/v1/sign-in-links", "", e2eJSON(t, map[string]string{"email": pdBuried + "@example.com"}), http.StatusAccepted, nil)
	e2eAwait(t, retried, "the refused mail's retry")
	mx.Stop()
	e2eAwait(t, buried, "the mail's burial")

	// Delete the account, and wait for the activity to drop its rows.
	app.expect(t, "DELETE", "/v1/me", session.Token, "", http.StatusNoContent, nil)
	app.expect(t, "GET", "/v1/me", session.Token, "", http.StatusUnauthorized, nil)
	awaitDump(t, database.Direct, "the erasure of the account's activity", func(d string) bool {
		d = strings.ToLower(d)
		return !strings.Contains(d, pdFirst) && !strings.Contains(d, pdSecond)
	})
	app.stop(t)

	// The database: the buried mail's payload alone keeps its recipient
	// and code, and its stored error neither.
	rows := dumpRows(t, database.Direct)
	var payload mail.Link
	var lastError string
	for _, r := range rows {
		if p, _ := r.Value("payload"); r.Table == "outbox_messages" && strings.Contains(p, pdBuried) {
			if err := json.Unmarshal([]byte(p), &payload); err != nil {
				t.Fatalf("the buried mail's payload %q: %v", p, err)
			}
			lastError, _ = r.Value("last_error")
		}
	}
	if payload.Code == "" {
		t.Fatalf("no buried mail with a code to %s in the outbox:\n%s", pdBuried, dbdump.Text(rows))
	}
	secrets = append(secrets, payload.Code)
	if lastError == "" || lastError == dbdump.Null {
		t.Error("the buried mail has no stored error: the test cannot tell")
	}
	for _, r := range rows {
		for i, col := range r.Columns {
			v := r.Values[i]
			if r.Table == "outbox_messages" && col == "payload" {
				continue
			}
			// The view of unused codes names the address of each until
			// the sweep deletes the expired ones.
			if r.Table == "signin_codes" && col == "email" && v == pdBuried+"@example.com" {
				continue
			}
			if s := leaked(v, secrets); s != "" {
				t.Errorf("%s.%s holds %q: %s", r.Table, col, s, v)
			}
		}
	}

	// The log: every line, at every level.
	logs := app.logs.String()
	for _, want := range []string{"no such user", `"msg":"outbox: message buried"`, `"msg":"mail: delivered"`, `"msg":"Querying message"`, `"query":"INSERT INTO projection_offsets`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the log lacks %s: the test cannot tell", want)
		}
	}
	for line := range strings.Lines(logs) {
		if s := leaked(line, secrets); s != "" {
			t.Errorf("a log line holds %q: %s", s, line)
		}
		// Statements may be logged, their parameters never.
		if strings.Contains(line, `"query_args"`) || strings.Contains(line, `"Args"`) {
			t.Errorf("a log line holds SQL parameters: %s", line)
		}
	}

	// The spans: every export, whole, as the collector received it.
	names := map[string]bool{}
	exports, statements := 0, 0
	for _, export := range rc.exports() {
		exports++
		for _, rs := range export.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					names[s.Name] = true
					for _, a := range s.Attributes {
						if a.Key == "db.query.text" {
							statements++
						}
					}
					text, err := protojson.Marshal(s)
					if err != nil {
						t.Fatal(err)
					}
					if l := leaked(string(text), secrets); l != "" {
						t.Errorf("span %q holds %q: %s", s.Name, l, text)
					}
				}
			}
			ss := rs.ScopeSpans
			rs.ScopeSpans = nil
			for _, s := range ss {
				s.Spans = nil
				text, err := protojson.Marshal(s)
				if err != nil {
					t.Fatal(err)
				}
				if l := leaked(string(text), secrets); l != "" {
					t.Errorf("a scope holds %q: %s", l, text)
				}
			}
			text, err := protojson.Marshal(rs)
			if err != nil {
				t.Fatal(err)
			}
			if l := leaked(string(text), secrets); l != "" {
				t.Errorf("a resource holds %q: %s", l, text)
			}
		}
	}
	if strings.HasPrefix(database.Direct, "postgres") && statements == 0 {
		t.Error("no span of a statement (db.query.text): the test cannot tell")
	}
	for _, want := range []string{"POST /v1/sign-in-links", "GET /sign-in", "user.SignIn", "DELETE /v1/me", "outbox deliver " + mail.TopicLoginLink, "smtp send"} {
		if !names[want] {
			t.Errorf("no span %q among the %d exports: the test cannot tell; spans: %v", want, exports, names)
		}
	}
}

// leaked returns the first of secrets that text holds, in any case, or "".
func leaked(text string, secrets []string) string {
	text = strings.ToLower(text)
	for _, s := range secrets {
		if s != "" && strings.Contains(text, strings.ToLower(s)) {
			return s
		}
	}
	return ""
}

// e2eAwait waits for signal, failing t after e2eWait.
func e2eAwait(t *testing.T, signal <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-signal:
	case <-time.After(e2eWait):
		t.Fatalf("waited %s for %s", e2eWait, what)
	}
}
