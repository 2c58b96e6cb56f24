package mailtest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/outbox"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user/mail"
	"github.com/eventsourced/accounts/internal/user/mail/mailtest"
)

var start = time.Date(2031, time.March, 4, 5, 6, 7, 0, time.UTC)

// memStore is an outbox store in memory that keeps the contract's claim
// order, earliest due first.
type memStore struct {
	mu   sync.Mutex
	due  map[uuid.UUID]time.Time
	msgs map[uuid.UUID]outbox.Message
}

func newMemStore() *memStore {
	return &memStore{due: map[uuid.UUID]time.Time{}, msgs: map[uuid.UUID]outbox.Message{}}
}

func (s *memStore) Add(_ context.Context, _ uow.Tx, msgs ...outbox.Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		s.msgs[m.ID] = m
		s.due[m.ID] = m.CreatedAt
	}
	return nil
}

func (s *memStore) Claim(_ context.Context, now time.Time, lease time.Duration, limit int) ([]outbox.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []uuid.UUID
	for id, at := range s.due {
		if !at.After(now) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int {
		if c := s.due[a].Compare(s.due[b]); c != 0 {
			return c
		}
		return slices.Compare(a[:], b[:])
	})
	if len(ids) > limit {
		ids = ids[:limit]
	}
	out := make([]outbox.Message, len(ids))
	for i, id := range ids {
		m := s.msgs[id]
		m.Attempts++
		s.msgs[id] = m
		s.due[id] = now.Add(lease)
		out[i] = m
	}
	return out, nil
}

func (s *memStore) Ack(_ context.Context, id uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.msgs, id)
	delete(s.due, id)
	return nil
}

func (s *memStore) Retry(context.Context, uuid.UUID, time.Time, string) error { return nil }
func (s *memStore) Bury(context.Context, uuid.UUID, string) error             { return nil }

func (s *memStore) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.msgs)
}

// add adds a message for topic with payload, created at.
func (s *memStore) add(t *testing.T, topic string, payload any, at time.Time) outbox.Message {
	t.Helper()
	m, err := outbox.NewMessage(topic, payload, at)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Add(t.Context(), nil, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func link(i int, at time.Time) mail.Link {
	return mail.Link{
		To:        fmt.Sprintf("user%d@example.com", i),
		URL:       fmt.Sprintf("https://accounts.test/sign-in?code=code%d", i),
		Code:      fmt.Sprintf("code%d", i),
		ExpiresAt: at.Add(15 * time.Minute).UTC(),
	}
}

func TestTake(t *testing.T) {
	t.Parallel()
	s := newMemStore()
	if got := mailtest.Take(t, s, start); len(got) != 0 {
		t.Fatalf("Take of an empty outbox: %+v, want none", got)
	}

	// More messages than one claim takes, added in an order other than
	// their creation's, and one that is not due yet.
	const n = 2500
	var want []mailtest.Sent
	for i := range n {
		at := start.Add(-time.Duration(i) * time.Second)
		topic := mail.TopicLoginLink
		if i%2 == 1 {
			topic = mail.TopicEmailChange
		}
		m := s.add(t, topic, link(i, at), at)
		want = append(want, mailtest.Sent{ID: m.ID, Topic: topic, Link: link(i, at)})
	}
	slices.Reverse(want) // oldest first
	later := s.add(t, mail.TopicLoginLink, link(n, start.Add(time.Hour)), start.Add(time.Hour))

	got := mailtest.Take(t, s, start)
	if len(got) != n {
		t.Fatalf("Take returned %d mails, want %d", len(got), n)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("mail %d: %+v, want %+v", i, got[i], want[i])
		}
	}
	if s.len() != 1 {
		t.Errorf("the outbox holds %d messages after Take, want only the one not due", s.len())
	}
	if got := mailtest.Take(t, s, start); len(got) != 0 {
		t.Errorf("a second Take: %+v, want none", got)
	}
	got = mailtest.Take(t, s, start.Add(100*365*24*time.Hour))
	if len(got) != 1 || got[0].ID != later.ID || got[0].Link != link(n, start.Add(time.Hour)) {
		t.Errorf("Take far in the future: %+v, want the later message %s", got, later.ID)
	}
	if s.len() != 0 {
		t.Errorf("the outbox holds %d messages, want none", s.len())
	}
}

// fatalTB records a Fatalf and ends the goroutine as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (f *fatalTB) Fatal(args ...any) {
	f.msg = fmt.Sprint(args...)
	runtime.Goexit()
}

func TestTakeFailsOnOtherPayloads(t *testing.T) {
	t.Parallel()
	for what, payload := range map[string]any{
		"a string":              "hello",
		"an array":              []string{"a"},
		"a number":              5,
		"an unknown field":      map[string]any{"to": "ada@example.com", "subject": "hi"},
		"a wrongly typed field": map[string]any{"to": 5},
	} {
		t.Run(strings.ReplaceAll(what, " ", "_"), func(t *testing.T) {
			t.Parallel()
			s := newMemStore()
			m := s.add(t, mail.TopicLoginLink, payload, start)
			f := &fatalTB{TB: t}
			done := make(chan []mailtest.Sent)
			go func() {
				defer close(done)
				done <- mailtest.Take(f, s, start)
			}()
			if got, ok := <-done; ok {
				t.Fatalf("Take returned %+v for %s, want it to fail the test", got, what)
			}
			if !strings.Contains(f.msg, m.ID.String()) || !strings.Contains(f.msg, "not a mail.Link") {
				t.Errorf("failure %q, want it to name message %s and say it is not a mail.Link", f.msg, m.ID)
			}
			raw, _ := json.Marshal(payload)
			if !strings.Contains(f.msg, string(raw)) {
				t.Errorf("failure %q, want it to show the payload %s", f.msg, raw)
			}
		})
	}
}
