package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/smtp/smtptest"
)

// TestNoMailboxFlooding runs the whole app, API and relay, on each backend
// with a real SMTP server, and has strangers aim every kind of mail at one
// mailbox, spelt many ways (victim+1@..., victim+2@...): sign-in links, the
// confirmations of changes of address that their accounts ask for, and
// the notices that the address they asked for has an account. It counts
// what reaches the mailbox: the sign-in links that its limit lets through
// (LINK_LIMIT, for every spelling together), and everything it receives
// no more than MAIL_BUDGET; the API answers every change request alike,
// sent or held back, and the log names no address of the mailbox.
func TestNoMailboxFlooding(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"PostgreSQL", "SQLite"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			flooding(t, e2eDatabases[name](t))
		})
	}
}

func flooding(t *testing.T, database e2eDatabase) {
	const (
		linkLimit = 5
		budget    = 20
		spellings = 12
		strangers = 4
	)
	mx := smtptest.NewServer(t)
	app := e2eStart(t, database.mailing(mx, map[string]string{
		"SWEEP_INTERVAL":     "0",
		"HTTP_RATE_LIMIT":    "0", // Not the per-client limit: the mailbox's.
		"LINK_LIMIT":         fmt.Sprint(linkLimit),
		"LINK_WINDOW":        "15m",
		"MAIL_BUDGET":        fmt.Sprint(budget),
		"MAIL_BUDGET_WINDOW": "1h",
	}))
	mails := &e2eMails{mx: mx}
	accepted := 0 // messages added to the outbox, by the 202s
	signIn := func(email string) string {
		t.Helper()
		accepted++
		return app.signIn(t, mails, email).Token
	}
	// The owner of the mailbox has an account; the strangers have theirs.
	signIn("victim@example.com")
	var tokens []string
	for i := range strangers {
		tokens = append(tokens, signIn(fmt.Sprintf("mallory%d@attacker.test", i)))
	}

	// Sign-in links to every spelling, five times each.
	var links, limited int
	for k := range spellings {
		for range 5 {
			status := app.post(t, "/v1/sign-in-links", "", e2eJSON(t, map[string]string{"email": fmt.Sprintf("victim+%d@example.com", k+1)}))
			switch status {
			case http.StatusAccepted:
				links++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("POST /v1/sign-in-links: %d, want 202 or 429", status)
			}
		}
	}
	accepted += links
	// The owner's own link counts against the mailbox's limit too.
	if links != linkLimit-1 {
		t.Errorf("%d sign-in links to %d spellings of one mailbox were accepted, want %d: LINK_LIMIT counts the mailbox", links, spellings, linkLimit-1)
	}
	// Every link is mailed before the changes are asked for, so that the
	// count does not hang on the order the relay takes them in.
	app.awaitSum(t, "outbox_delivered_total", `mail\.login_link`, accepted)

	// Each stranger asks as many changes as it may: to spellings of the
	// mailbox that have no account (a confirmation link each), and to the
	// owner's address (a notice each that it has an account).
	for i, token := range tokens {
		for j := range linkLimit {
			to := fmt.Sprintf("victim+change%d.%d@example.com", i, j)
			if j%2 == 1 {
				to = "victim@example.com"
			}
			// Sent or held back, the answer is the same.
			app.expect(t, "POST", "/v1/me/email-change", token, e2eJSON(t, map[string]string{"new_email": to}), http.StatusAccepted, nil)
			accepted++
		}
	}
	app.awaitSum(t, "outbox_delivered_total", `mail\..*`, accepted)
	app.stop(t)

	// What reached the mailbox, went to the address as given.
	got := map[string]int{}
	total, pastLimit := 0, 0
	for _, m := range mx.Messages() {
		if len(m.To) != 1 {
			t.Fatalf("a mail went to %v, want one recipient", m.To)
		}
		to := m.To[0]
		if !strings.HasPrefix(to, "victim") || !strings.HasSuffix(to, "@example.com") {
			continue
		}
		total++
		got[m.Header.Get("Subject")]++
		if to == "victim+1@example.com" || to == "victim@example.com" || strings.HasPrefix(to, "victim+change") {
			continue
		}
		if m.Header.Get("Subject") == "Your sign-in link" {
			pastLimit++
		}
	}
	if pastLimit > 0 {
		t.Errorf("%d sign-in links went to spellings asked for after the mailbox's limit was reached", pastLimit)
	}
	t.Logf("the mailbox received %d mails: %v; %d sign-in requests were refused (429)", total, got, limited)
	if total > budget {
		t.Errorf("the mailbox received %d mails, want at most MAIL_BUDGET, %d", total, budget)
	}
	if n := got["Your sign-in link"]; n != linkLimit {
		t.Errorf("the mailbox received %d sign-in links, want LINK_LIMIT, %d", n, linkLimit)
	}
	if n := got["Confirm your new email address"] + got["Your email address was given for another account"]; n != budget-linkLimit {
		t.Errorf("the mailbox received %d confirmations and notices, want what the budget leaves after the links, %d", n, budget-linkLimit)
	}
	logs := app.logs.String()
	// Each held-back mail is logged with its topic, its message ID and
	// the request that set it off, from which an operator finds the
	// client.
	held := regexp.MustCompile(`(?m)^.*msg="mail: held back, the mailbox's budget is spent".*$`).FindAllString(logs, -1)
	if want := strangers*linkLimit - (budget - linkLimit); len(held) != want {
		t.Errorf("the log has %d lines of mail held back, want %d", len(held), want)
	}
	for _, line := range held {
		for _, attr := range []string{`topic=mail.email_`, ` id=`, ` request_id=`} {
			if !strings.Contains(line, attr) {
				t.Errorf("a line of mail held back lacks %q: %s", attr, line)
			}
		}
	}
	if strings.Contains(logs, "victim") {
		t.Errorf("the log names the mailbox:\n%s", logs)
	}
}

// post makes a POST with a JSON body and returns the answer's status.
func (a *e2eApp) post(t *testing.T, path, token, body string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "POST", a.base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// awaitSum waits until the series of the counter name whose topic
// matches the regular expression topics sum to want, and fails t if they
// pass it.
func (a *e2eApp) awaitSum(t *testing.T, name, topics string, want int) {
	t.Helper()
	series := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} (\S+)$`)
	topic := regexp.MustCompile(`(?:^|,)topic="(` + topics + `)"(?:,|$)`)
	deadline := time.After(e2eWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := a.client.Get(a.base + "/metrics")
		if err != nil {
			t.Fatalf("GET /metrics: %v", err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		sum := 0.0
		for _, m := range series.FindAllStringSubmatch(string(raw), -1) {
			var v float64
			if _, err := fmt.Sscan(m[2], &v); err == nil && topic.MatchString(m[1]) {
				sum += v
			}
		}
		if sum == float64(want) {
			return
		}
		if sum > float64(want) {
			t.Fatalf("%s of topics %s sums to %g, past %d", name, topics, sum, want)
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s of topics %s summed to %g, not %d, within %s", name, topics, sum, want, e2eWait)
		}
	}
}
