package smtp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/smtp"
	"github.com/eventsourced/accounts/internal/smtp/smtptest"
	"github.com/eventsourced/accounts/internal/user/mail"
)

func TestNewRefusesURLsThatCannotWorkWithoutShowingThePassword(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"smtp://user:s3cret%zz@mail.example.com:587",
		"http://user:s3cret@mail.example.com",
		"smtp://user:s3cret@:587",
		"smtp://user:s3cret@mail.example.com:0",
		"smtp://user:s3cret@mail.example.com:99999",
		"smtp://user:s3cret@mail.example.com:x",
	} {
		_, err := smtp.New(u, time.Second)
		if err == nil {
			t.Errorf("New(%q) accepted", u)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q): the error shows the password: %v", u, err)
		}
	}
	for _, u := range []string{"smtp://mail.example.com", "smtps://user:pass@mail.example.com:465", "smtp://127.0.0.1:2525"} {
		if _, err := smtp.New(u, time.Second); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}

// Implicit TLS (smtps) to a server that speaks plain SMTP fails rather
// than sending in the clear.
func TestSMTPSNeverFallsBackToPlainText(t *testing.T) {
	t.Parallel()
	srv := smtptest.NewServer(t)
	s, err := smtp.New(strings.Replace(srv.URL(), "smtp://", "smtps://", 1), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Send(t.Context(), mail.Mail{From: "a@example.com", To: "b@example.com", Subject: "s", MessageID: "x@example.com", Text: "t"})
	if err == nil {
		t.Fatal("smtps to a plain-text server sent the mail")
	}
	if got := srv.Messages(); len(got) != 0 {
		t.Errorf("the server received %d messages in the clear", len(got))
	}
}

// The end of Send's context ends an exchange at once, even one waiting
// for the server's answer, so a stopping relay need not wait out the
// timeout.
func TestSendEndsWithItsContext(t *testing.T) {
	t.Parallel()
	srv := smtptest.NewServer(t)
	srv.Hold()
	s, err := smtp.New(srv.URL(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- s.Send(ctx, mail.Mail{From: "a@example.com", To: "b@example.com", Subject: "s", MessageID: "x@example.com", Text: "t"})
	}()
	<-srv.Held()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Send after its context ended: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Send went on waiting for the server after its context ended")
	}
}

// A send's error names no recipient, whether the server quotes it in its
// reply or the address does not parse, and keeps the mail's Message-ID.
func TestSendErrorsKeepNoAddress(t *testing.T) {
	t.Parallel()
	const quoted = "5.1.1 <ann.refused@example.com> unknown"
	for _, tc := range []struct {
		name, to, reply, want string
		ids                   int // go-mail repeats the Message-ID of a refusal
	}{
		{"RefusedRecipient", "ann.refused@example.com", quoted, "550", 2},
		// A server may change the address's case and quote the mailbox
		// alone.
		{"MailboxQuotedAlone", "ann.refused@example.com", "5.1.1 user ANN.REFUSED@EXAMPLE.COM (Ann.Refused) unknown", "550", 2},
		{"AddressThatDoesNotParse", "ann.refused@@example.com", quoted, "is no address", 1},
		{"UnclosedAngleAddress", "Ann <ann.refused@example.com", quoted, "is no address", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := smtptest.NewServer(t)
			srv.Refuse(550, tc.reply)
			s, err := smtp.New(srv.URL(), time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Send(t.Context(), mail.Mail{From: "a@example.com", To: tc.to, Subject: "s", MessageID: "0190a3b1-77@accounts.test", Text: "t"})
			if err == nil {
				t.Fatal("Send to a refused recipient succeeded")
			}
			if strings.Contains(strings.ToLower(err.Error()), "ann.refused") {
				t.Errorf("Send's error names the recipient: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Send's error %q lacks %q", err, tc.want)
			}
			// The mail's Message-ID, shaped like an address, names no one
			// and is kept wherever the error repeats it.
			if got := strings.Count(err.Error(), "0190a3b1-77@accounts.test"); got != tc.ids {
				t.Errorf("Send's error %q names the Message-ID %d times, want %d", err, got, tc.ids)
			}
		})
	}
}

// A refusal of the recipient for good wraps mail.ErrRefused, so that its
// message is buried at once; every other refusal is tried again. The
// enhanced status code decides, whether or not the server announces
// ENHANCEDSTATUSCODES (smtptest's does; refusingServer's does not).
func TestSendRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		announced bool
		code      int
		reply     string
		forGood   bool
	}{
		{"NoSuchMailbox", true, 550, "5.1.1 no such mailbox", true},
		{"BadAddressSyntax", true, 553, "5.1.3 bad destination mailbox address syntax", true},
		{"RelayingDenied", true, 550, "5.7.1 relaying denied", false},
		{"SenderRejectedAtRcpt", true, 550, "5.1.0 sender address rejected: user unknown", false},
		{"NoEnhancedCode", true, 550, "mailbox unavailable", false},
		{"MailboxBusy", true, 450, "4.2.1 mailbox busy, try later", false},
		{"NoSuchMailboxUnannounced", false, 550, "5.1.1 no such mailbox", true},
		{"QmailRelayUnannounced", false, 553, "sorry, that domain isn't in my list of allowed rcpthosts (#5.7.1)", false},
		{"NoEnhancedCodeUnannounced", false, 550, "mailbox unavailable", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var url string
			if tc.announced {
				srv := smtptest.NewServer(t)
				srv.Refuse(tc.code, tc.reply)
				url = srv.URL()
			} else {
				url = refusingServer(t, fmt.Sprintf("%d %s", tc.code, tc.reply))
			}
			s, err := smtp.New(url, time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Send(t.Context(), mail.Mail{From: "a@example.com", To: "ada@example.com", Subject: "s", MessageID: "id@accounts.test", Text: "t"})
			if err == nil {
				t.Fatal("Send to a refused recipient succeeded")
			}
			if got := errors.Is(err, mail.ErrRefused); got != tc.forGood {
				t.Errorf("%d %s: errors.Is(err, mail.ErrRefused) = %t, want %t (err: %v)", tc.code, tc.reply, got, tc.forGood, err)
			}
			if errors.Is(err, outbox.ErrUnreachable) {
				t.Errorf("%d %s: a reply of the server wraps outbox.ErrUnreachable: %v", tc.code, tc.reply, err)
			}
			if !strings.Contains(err.Error(), tc.reply) {
				t.Errorf("Send's error %q lacks the server's reply", err)
			}
		})
	}
	t.Run("RecipientThatIsNoAddress", func(t *testing.T) {
		t.Parallel()
		s, err := smtp.New(smtptest.NewServer(t).URL(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		err = s.Send(t.Context(), mail.Mail{From: "a@example.com", To: "ada@@example.com", Subject: "s", MessageID: "id@accounts.test", Text: "t"})
		if !errors.Is(err, mail.ErrRefused) {
			t.Errorf("a recipient that does not parse: %v, want mail.ErrRefused", err)
		}
	})
}

// A server that cannot be reached at all, whose connection is refused,
// whose name does not resolve or that does not answer within the timeout,
// fails the send with outbox.ErrUnreachable, which opens the topic's
// breaker at once; the error still names no recipient.
func TestSendToAServerThatCannotBeReached(t *testing.T) {
	t.Parallel()
	closed := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		return "smtp://" + addr
	}
	silent := func(t *testing.T) string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = l.Close() })
		go func() {
			for {
				conn, err := l.Accept()
				if err != nil {
					return
				}
				// Never greets; closed when the listener's test ends.
				t.Cleanup(func() { _ = conn.Close() })
			}
		}()
		return "smtp://" + l.Addr().String()
	}
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"ConnectionRefused", closed},
		{"NameDoesNotResolve", func(*testing.T) string { return "smtp://mail.accounts.invalid:2525" }},
		{"NoAnswer", silent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := smtp.New(tc.url(t), 500*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			err = s.Send(t.Context(), mail.Mail{From: "a@example.com", To: "ann.unreached@example.com", Subject: "s", MessageID: "id@accounts.test", Text: "t"})
			if !errors.Is(err, outbox.ErrUnreachable) {
				t.Fatalf("Send: %v, want outbox.ErrUnreachable", err)
			}
			if errors.Is(err, mail.ErrRefused) || strings.Contains(err.Error(), "ann.unreached") {
				t.Errorf("Send: %v, want no refusal and no recipient named", err)
			}
		})
	}
}

// refusingServer serves SMTP on loopback, announcing no extension, and
// answers every RCPT TO with reply; it returns its SMTP_URL.
func refusingServer(t *testing.T, reply string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				tc := textproto.NewConn(conn)
				_ = tc.PrintfLine("220 refusing.test")
				for {
					line, err := tc.ReadLine()
					if err != nil {
						return
					}
					switch verb, _, _ := strings.Cut(strings.ToUpper(line), " "); verb {
					case "EHLO", "HELO", "MAIL", "RSET", "NOOP":
						_ = tc.PrintfLine("250 ok")
					case "RCPT":
						_ = tc.PrintfLine("%s", reply)
					case "QUIT":
						_ = tc.PrintfLine("221 bye")
						return
					default:
						_ = tc.PrintfLine("502 not implemented")
					}
				}
			}()
		}
	}()
	return "smtp://" + l.Addr().String()
}
