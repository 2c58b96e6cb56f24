package mail_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/eventsourced/accounts/internal/keyring/keyringtest"
	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/sqlite/sqlitetest"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// budgeted is a set-up of the handlers with a budget of limit mails an
// hour, on a database of their own, a real SMTP server, a log and a meter.
type budgeted struct {
	srv      *smtptest.Server
	handlers map[string]outbox.Handler
	log      *bytes.Buffer
	reader   *sdkmetric.ManualReader
}

func setupBudget(t *testing.T, limit int, store func(mail.BudgetStore) mail.BudgetStore) budgeted {
	t.Helper()
	t.Parallel()
	db := sqlitetest.New(t)
	budget, err := mail.NewBudget(mail.BudgetConfig{Limit: limit, Window: time.Hour},
		db.Runner(func() time.Time { return now }), store(db.MailBudgets()), keyringtest.New(t, db.DataKeys()))
	if err != nil {
		t.Fatal(err)
	}
	b := budgeted{srv: smtptest.NewServer(t), log: &bytes.Buffer{}, reader: sdkmetric.NewManualReader()}
	sender, err := smtp.New(b.srv.URL(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b.handlers, err = mail.Handlers(sender, mail.Config{
		From: "accounts@accounts.test", Domain: "accounts.test",
		Now:    func() time.Time { return now },
		Log:    slog.New(slog.NewJSONHandler(b.log, nil)),
		Meter:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(b.reader)).Meter("test"),
		Budget: budget,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func same(s mail.BudgetStore) mail.BudgetStore { return s }

// deliver hands a new message of topic to to its handler.
func (b budgeted) deliver(t *testing.T, topic, to string) (outbox.Message, error) {
	t.Helper()
	link := mail.Link{To: to, URL: "https://accounts.test/x?code=c", Code: "c", ExpiresAt: now.Add(15 * time.Minute)}
	if topic == mail.TopicEmailTaken {
		link = mail.Link{To: to, ExpiresAt: now.Add(15 * time.Minute)}
	}
	m := message(t, topic, link)
	return m, b.handlers[topic](t.Context(), m)
}

// heldBack returns mail.held_back by topic.
func (b budgeted) heldBack(t *testing.T) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := b.reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "mail.held_back" {
				continue
			}
			for _, p := range m.Data.(metricdata.Sum[int64]).DataPoints {
				topic, _ := p.Attributes.Value("topic")
				out[topic.AsString()] = p.Value
			}
		}
	}
	return out
}

// Past its mailbox's budget, a mail is acknowledged without being sent,
// counted, and logged by its topic and ID alone; sign-in links are still
// sent, and count; a message delivered again spends nothing more; another
// mailbox has its own budget.
func TestBudgetHoldsBackMailPastIt(t *testing.T) {
	b := setupBudget(t, 3, same)
	if got := b.heldBack(t); len(got) != len(mail.Topics) || got[mail.TopicEmailChange] != 0 {
		t.Errorf("mail.held_back before any mail: %v, want 0 for each topic", got)
	}
	first, err := b.deliver(t, mail.TopicEmailChange, "ada+1@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.handlers[mail.TopicEmailChange](t.Context(), first); err != nil {
		t.Fatalf("the first mail delivered again: %v", err)
	}
	for _, d := range []struct{ topic, to string }{
		{mail.TopicLoginLink, "ada@example.com"},
		{mail.TopicEmailTaken, "Ada+2@Example.com"},
	} {
		if _, err := b.deliver(t, d.topic, d.to); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(b.srv.Messages()); n != 4 {
		t.Fatalf("%d mails within the budget, one delivered twice, reached the server, want 4", n)
	}
	var held []outbox.Message
	for _, d := range []struct{ topic, to string }{
		{mail.TopicEmailChange, "ada+3@example.com"},
		{mail.TopicEmailTaken, "ada@example.com"},
	} {
		m, err := b.deliver(t, d.topic, d.to)
		if err != nil {
			t.Fatalf("a mail held back must be acknowledged, got %v", err)
		}
		held = append(held, m)
	}
	if n := len(b.srv.Messages()); n != 4 {
		t.Errorf("%d mails reached the server, want the 4 within the budget", n)
	}
	// A sign-in link and the notice of a change to the account's own
	// address go past the budget: holding either back would let whoever
	// spent it lock the owner out, or hide the change.
	for _, d := range []struct{ topic, to string }{
		{mail.TopicLoginLink, "ada+4@example.com"},
		{mail.TopicEmailChanged, "ada@example.com"},
		{mail.TopicEmailChange, "bob@example.com"},
	} {
		if _, err := b.deliver(t, d.topic, d.to); err != nil {
			t.Fatal(err)
		}
	}
	got := b.srv.Messages()
	if n := len(got); n != 7 {
		t.Fatalf("%d mails reached the server, want a sign-in link and a notice past the budget, and Bob's mail too", n)
	}
	if got[4].To[0] != "ada+4@example.com" || got[5].To[0] != "ada@example.com" || got[6].To[0] != "bob@example.com" {
		t.Errorf("the last mails went to %v, %v and %v", got[4].To, got[5].To, got[6].To)
	}
	if got := b.heldBack(t); got[mail.TopicEmailChange] != 1 || got[mail.TopicEmailTaken] != 1 || got[mail.TopicLoginLink] != 0 || got[mail.TopicEmailChanged] != 0 {
		t.Errorf("mail.held_back = %v, want one confirmation and one notice of a taken address", got)
	}
	log := b.log.String()
	for _, m := range held {
		if !strings.Contains(log, `"msg":"mail: held back, the mailbox's budget is spent","topic":"`+m.Topic+`","id":"`+m.ID.String()+`"}`) {
			t.Errorf("no line says that %s %s was held back, and nothing more:\n%s", m.Topic, m.ID, log)
		}
	}
	// Look for the addresses, not for "ada" alone: that is also hex, and
	// a message ID can hold it.
	if l := strings.ToLower(log); strings.Contains(l, "example.com") || strings.Contains(l, "ada@") || strings.Contains(l, "ada+") {
		t.Errorf("the log names the mailbox:\n%s", log)
	}
}

// Every topic counts against the budget. Past it, the mail that someone
// other than its recipient sets off is held back: a confirmation to an
// address, the news that it was given, an invitation into an
// organization. A sign-in link and the notice of a change to the
// recipient's own account are sent.
func TestBudgetHoldsBackWhatOthersSetOff(t *testing.T) {
	held := map[string]bool{
		mail.TopicLoginLink:     false,
		mail.TopicEmailChange:   true,
		mail.TopicEmailTaken:    true,
		mail.TopicEmailChanged:  false,
		mail.TopicOrgInvitation: true,
	}
	if len(mail.Topics) != len(held) {
		t.Fatalf("mail.Topics = %v, want each of %v once", mail.Topics, slices.Collect(maps.Keys(held)))
	}
	for _, topic := range mail.Topics {
		if _, ok := held[topic]; !ok {
			t.Fatalf("mail.Topics has %s: say whether its budget holds it back", topic)
		}
	}
	b := setupBudget(t, 1, same)
	want := 0
	for i, topic := range mail.Topics {
		for _, to := range []string{fmt.Sprintf("box%d@example.com", i), fmt.Sprintf("Box%d+again@example.com", i)} {
			if _, err := b.deliver(t, topic, to); err != nil {
				t.Fatal(err)
			}
		}
		want += 2
		if held[topic] {
			want--
		}
		if n := len(b.srv.Messages()); n != want {
			t.Errorf("%s: %d mails reached the server, want %d: the second held back is %t", topic, n, want, held[topic])
			want = n
		}
	}
	got := b.heldBack(t)
	for topic, h := range held {
		if n := got[topic]; h && n != 1 || !h && n != 0 {
			t.Errorf("mail.held_back of %s = %d, want 1 when held back, else 0", topic, n)
		}
	}
}

// failingStore is a budget store whose holds fail as an unreachable
// database does.
type failingStore struct{ mail.BudgetStore }

func (failingStore) HoldBudget(context.Context, uow.Tx, string) ([]mail.Spend, error) {
	return nil, errors.New("connection refused")
}

// A budget that cannot be read fails the delivery, which the relay tries
// again: no mail goes without spending, and the error names no address.
func TestBudgetThatCannotBeSpentFailsTheDelivery(t *testing.T) {
	b := setupBudget(t, 3, func(s mail.BudgetStore) mail.BudgetStore { return failingStore{s} })
	_, err := b.deliver(t, mail.TopicEmailChange, "ada@example.com")
	if err == nil || errors.Is(err, outbox.ErrPermanent) {
		t.Fatalf("a delivery whose budget cannot be spent: %v, want an error to retry", err)
	}
	if strings.Contains(err.Error(), "ada@") {
		t.Errorf("the error names the address: %v", err)
	}
	if n := len(b.srv.Messages()); n != 0 {
		t.Errorf("%d mails sent without spending", n)
	}
}
