package mail_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/user/mail"
)

var now = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func setup(t *testing.T) (*smtptest.Server, map[string]outbox.Handler) {
	t.Helper()
	t.Parallel()
	srv := smtptest.NewServer(t)
	sender, err := smtp.New(srv.URL(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	handlers, err := mail.Handlers(sender, mail.Config{
		From: "accounts@accounts.test", Domain: "accounts.test",
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, handlers
}

func message(t *testing.T, topic string, link mail.Link) outbox.Message {
	t.Helper()
	payload, err := json.Marshal(link)
	if err != nil {
		t.Fatal(err)
	}
	return outbox.Message{ID: uuid.Must(uuid.NewV7()), Topic: topic, Payload: payload, CreatedAt: now, Attempts: 1}
}

func TestMailsCarryLinkCodeAndMessageID(t *testing.T) {
	srv, handlers := setup(t)
	for _, tc := range []struct {
		topic, path, subject string
	}{
		{mail.TopicLoginLink, "/sign-in", "Your sign-in link"},
		{mail.TopicEmailChange, "/confirm-email", "Confirm your new email address"},
		{mail.TopicOrgInvitation, "/invitations", "You are invited to join an organization"},
	} {
		code := "abcdefghijklmnopqrstuvwxyz234567"
		link := mail.Link{To: "ada@example.com", URL: "https://accounts.test" + tc.path + "?code=" + code, Code: code, ExpiresAt: now.Add(15 * time.Minute)}
		m := message(t, tc.topic, link)
		if err := handlers[tc.topic](t.Context(), m); err != nil {
			t.Fatalf("%s: %v", tc.topic, err)
		}
		got := srv.Messages()
		if len(got) == 0 {
			t.Fatalf("%s: no mail arrived", tc.topic)
		}
		last := got[len(got)-1]
		if id := last.Header.Get("Message-ID"); id != "<"+m.ID.String()+"@accounts.test>" {
			t.Errorf("%s: Message-ID %q, want the outbox message's ID at MAIL_DOMAIN", tc.topic, id)
		}
		if len(last.To) != 1 || last.To[0] != "ada@example.com" || last.From != "accounts@accounts.test" {
			t.Errorf("%s: envelope from %q to %v", tc.topic, last.From, last.To)
		}
		if s := last.Header.Get("Subject"); s != tc.subject {
			t.Errorf("%s: subject %q, want %q", tc.topic, s, tc.subject)
		}
		for _, line := range []string{link.URL, code} {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(line) + `\r?$`).MatchString(last.Text) {
				t.Errorf("%s: the text part lacks %q on a line of its own:\n%s", tc.topic, line, last.Text)
			}
		}
		if !strings.Contains(last.HTML, `<a href="`+link.URL+`">`) || !strings.Contains(last.HTML, code) {
			t.Errorf("%s: the HTML part lacks the link or the code:\n%s", tc.topic, last.HTML)
		}
	}
}

// The mail to an address that a user asked to move to, but which has an
// account, says so and carries no link, so nothing in it can move the
// address.
func TestTakenAddressMailSaysSoWithoutALink(t *testing.T) {
	srv, handlers := setup(t)
	m := message(t, mail.TopicEmailTaken, mail.Link{To: "bob@example.com", ExpiresAt: now.Add(15 * time.Minute)})
	if err := handlers[mail.TopicEmailTaken](t.Context(), m); err != nil {
		t.Fatal(err)
	}
	got := srv.Messages()
	if len(got) != 1 || len(got[0].To) != 1 || got[0].To[0] != "bob@example.com" {
		t.Fatalf("mails %+v, want one to bob@example.com", got)
	}
	if s := got[0].Header.Get("Subject"); s != "Your email address was given for another account" {
		t.Errorf("subject %q", s)
	}
	for part, body := range map[string]string{"text": got[0].Text, "HTML": got[0].HTML} {
		if !strings.Contains(body, "has an account of its own already, so nothing was changed") {
			t.Errorf("the %s part does not say the address is taken:\n%s", part, body)
		}
		if strings.Contains(body, "http") || strings.Contains(body, "code") {
			t.Errorf("the %s part carries a link or a code:\n%s", part, body)
		}
	}
}

// An invitation says who is invited to which organization, when it
// expires and what to do if it was not expected. The name, which the
// organization's owners chose, is one line of plain text in both parts:
// it can add no header, no line and no markup, nor turn the text around
// it.
func TestInvitationNamesItsOrganizationAsPlainText(t *testing.T) {
	srv, handlers := setup(t)
	invite := func(t *testing.T, name string) smtptest.Message {
		t.Helper()
		code := "abcdefghijklmnopqrstuvwxyz234567"
		link := mail.Link{
			To: "ada@example.com", URL: "https://accounts.test/invitations?code=" + code, Code: code,
			ExpiresAt: now.Add(7 * 24 * time.Hour), Organization: name,
		}
		before := len(srv.Messages())
		if err := handlers[mail.TopicOrgInvitation](t.Context(), message(t, mail.TopicOrgInvitation, link)); err != nil {
			t.Fatal(err)
		}
		got := srv.Messages()
		if len(got) != before+1 {
			t.Fatalf("%d mails arrived, want 1", len(got)-before)
		}
		return got[len(got)-1]
	}
	t.Run("Says", func(t *testing.T) {
		m := invite(t, "Ada's Café & Co")
		for _, want := range []string{
			"“Ada's Café & Co” invited ada@example.com to join it",
			"expires at 2030-01-09 03:04 UTC",
			"If you did not expect this invitation, ignore this mail",
		} {
			if !strings.Contains(m.Text, want) {
				t.Errorf("the text part lacks %q:\n%s", want, m.Text)
			}
		}
		if want := "“Ada&#39;s Café &amp; Co” invited ada@example.com"; !strings.Contains(m.HTML, want) {
			t.Errorf("the HTML part lacks %q:\n%s", want, m.HTML)
		}
	})
	t.Run("InjectsNothing", func(t *testing.T) {
		const name = "Acme\r\nBcc: eve@example.com\r\n\r\nhttps://evil.test/?code=x\n<script>alert(1)</script><a href=\"https://evil.test\">x</a>\u202etxt.exe\u2028\x00\xff"
		m := invite(t, name)
		if len(m.To) != 1 || m.To[0] != "ada@example.com" || len(m.Header["Bcc"]) != 0 {
			t.Errorf("the mail went to %v with Bcc %v, want Ada alone", m.To, m.Header["Bcc"])
		}
		if s := m.Header.Get("Subject"); s != "You are invited to join an organization" {
			t.Errorf("subject %q", s)
		}
		shown := "Acme��Bcc: eve@example.com����https://evil.test/?code=x�"
		for part, body := range map[string]string{"text": m.Text, "HTML": m.HTML} {
			if !strings.Contains(body, shown) {
				t.Errorf("the %s part does not show the name on one line as %q:\n%s", part, shown, body)
			}
			if regexp.MustCompile(`(?m)^(Bcc|https://evil)`).MatchString(body) || strings.ContainsAny(body, "\u202e\u2028\x00") {
				t.Errorf("the name broke the %s part's lines or turned its text:\n%q", part, body)
			}
		}
		if !strings.Contains(m.Text, "<script>alert(1)</script>") {
			t.Errorf("the text part changed the name's markup, which plain text shows as it is:\n%s", m.Text)
		}
		if strings.Contains(m.HTML, "<script") || strings.Contains(m.HTML, "evil.test\">") || !strings.Contains(m.HTML, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("the HTML part holds the name's markup unescaped:\n%s", m.HTML)
		}
	})
}

func TestExpiredLinkIsDroppedNotSent(t *testing.T) {
	srv, handlers := setup(t)
	link := mail.Link{To: "ada@example.com", URL: "https://accounts.test/sign-in?code=x", Code: "x", ExpiresAt: now}
	if err := handlers[mail.TopicLoginLink](t.Context(), message(t, mail.TopicLoginLink, link)); err != nil {
		t.Fatalf("an expired link must be acknowledged, got %v", err)
	}
	// Send returns only after the server has taken the message, so a mail
	// that was sent would be here now.
	if got := srv.Messages(); len(got) != 0 {
		t.Errorf("an expired link was mailed: %+v", got)
	}
}

// A buried link whose code the sweep redacted is dropped when requeued,
// however its expiry reads, never mailed without its code.
func TestRedactedLinkIsDroppedNotSent(t *testing.T) {
	srv, handlers := setup(t)
	for _, topic := range []string{mail.TopicLoginLink, mail.TopicEmailChange, mail.TopicOrgInvitation} {
		link := mail.Link{To: "ada@example.com", Organization: "Acme", ExpiresAt: now.Add(time.Hour)}
		if err := handlers[topic](t.Context(), message(t, topic, link)); err != nil {
			t.Fatalf("%s: a redacted link must be acknowledged, got %v", topic, err)
		}
	}
	if got := srv.Messages(); len(got) != 0 {
		t.Errorf("a redacted link was mailed: %+v", got)
	}
}

// A refused mail is an error with the server's reply. A refusal of the
// recipient for good, and a payload that does not decode, wrap
// outbox.ErrPermanent, so that the relay buries them at once; a refusal
// the server may lift does not.
func TestRefusedMail(t *testing.T) {
	t.Parallel()
	link := mail.Link{To: "ada@example.com", URL: "https://accounts.test/sign-in?code=x", Code: "x", ExpiresAt: now.Add(time.Minute)}
	for _, tc := range []struct {
		name      string
		code      int
		reply     string
		permanent bool
	}{
		{"ForGood", 550, "5.1.1 mailbox unavailable", true},
		{"ForNow", 450, "4.2.1 mailbox busy", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, handlers := setup(t)
			srv.Refuse(tc.code, tc.reply)
			err := handlers[mail.TopicLoginLink](t.Context(), message(t, mail.TopicLoginLink, link))
			if err == nil || !strings.Contains(err.Error(), strconv.Itoa(tc.code)) || !strings.Contains(err.Error(), tc.reply) {
				t.Errorf("refused mail: %v, want an error with the server's reply %d %s", err, tc.code, tc.reply)
			}
			if got := errors.Is(err, outbox.ErrPermanent); got != tc.permanent {
				t.Errorf("errors.Is(%v, outbox.ErrPermanent) = %t, want %t", err, got, tc.permanent)
			}
		})
	}
	t.Run("PayloadThatDoesNotDecode", func(t *testing.T) {
		_, handlers := setup(t)
		bad := message(t, mail.TopicLoginLink, link)
		bad.Payload = []byte(`{"to":`)
		if err := handlers[mail.TopicLoginLink](t.Context(), bad); !errors.Is(err, outbox.ErrPermanent) {
			t.Errorf("a payload that does not decode: %v, want outbox.ErrPermanent", err)
		}
	})
}
