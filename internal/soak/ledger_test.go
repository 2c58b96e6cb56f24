package soak

import (
	"strings"
	"testing"
)

// The ledger's checks find each way of breaking a promise: a lost mail, a
// mail sent twice under two Message-IDs, an event missing, out of order or
// about a user nobody made; and they let pass what an unknown outcome
// allows.
func TestLedgerFindsBrokenPromises(t *testing.T) {
	t.Run("mails", func(t *testing.T) {
		l := newLedger()
		l.mail("a@soak.test", kindSignIn, false)
		l.mail("a@soak.test", kindSignIn, false)
		l.mail("b@soak.test", kindSignIn, false)
		l.mail("b@soak.test", kindSignIn, true)
		l.mail("c@soak.test", kindConfirm, false)
		for _, c := range []struct {
			name     string
			received map[string]int
			want     []string
		}{
			{"all arrived", map[string]int{"a@soak.test sign-in": 2, "b@soak.test sign-in": 1, "c@soak.test confirm": 1}, nil},
			{"the optional one too", map[string]int{"a@soak.test sign-in": 2, "b@soak.test sign-in": 2, "c@soak.test confirm": 1}, nil},
			{"lost", map[string]int{"a@soak.test sign-in": 1, "b@soak.test sign-in": 1}, []string{"lost mail: a@soak.test sign-in got 1 of 2", "lost mail: c@soak.test confirm got 0 of 1"}},
			{"extra", map[string]int{"a@soak.test sign-in": 3, "b@soak.test sign-in": 1, "c@soak.test confirm": 1}, []string{"extra mail: a@soak.test sign-in"}},
			{"unasked", map[string]int{"a@soak.test sign-in": 2, "b@soak.test sign-in": 1, "c@soak.test confirm": 1, "d@soak.test sign-in": 1}, []string{"mail nobody asked for"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				expected, failures := l.checkMails(c.received)
				if expected != 4 {
					t.Errorf("expected %d mails, want 4", expected)
				}
				wantFailures(t, failures, c.want)
			})
		}
	})
	t.Run("events", func(t *testing.T) {
		l := newLedger()
		l.event("u1", evRegistered, false)
		l.event("u1", evSignedIn, false)
		l.event("u1", evDeleted, false)
		l.event("u2", evRegistered, false)
		l.event("u2", evSignedIn, false)
		l.event("u2", evSignedIn, true)
		l.unknownUser()
		ev := func(typ string, version int) brokerEvent { return brokerEvent{typ: typ, version: version} }
		good := func() map[string][]brokerEvent {
			return map[string][]brokerEvent{
				"u1": {ev(evRegistered, 1), ev(evSignedIn, 2), ev(evDeleted, 3)},
				"u2": {ev(evRegistered, 1), ev(evSignedIn, 2)},
			}
		}
		for _, c := range []struct {
			name   string
			change func(map[string][]brokerEvent)
			want   []string
		}{
			{"all in order", func(map[string][]brokerEvent) {}, nil},
			{"the optional one too", func(m map[string][]brokerEvent) { m["u2"] = append(m["u2"], ev(evSignedIn, 3)) }, nil},
			{"one stranger, from the unknown outcome", func(m map[string][]brokerEvent) { m["u3"] = []brokerEvent{ev(evRegistered, 1)} }, nil},
			{"two strangers", func(m map[string][]brokerEvent) {
				m["u3"] = []brokerEvent{ev(evRegistered, 1)}
				m["u4"] = []brokerEvent{ev(evRegistered, 1)}
			}, []string{"events of 2 users the ledger does not know"}},
			{"missing", func(m map[string][]brokerEvent) { m["u1"] = m["u1"][:2] }, []string{"user u1: the broker holds"}},
			{"out of order", func(m map[string][]brokerEvent) {
				m["u1"] = []brokerEvent{ev(evSignedIn, 2), ev(evRegistered, 1), ev(evDeleted, 3)}
			}, []string{"user u1: " + evRegistered + " version 1 came after version 2", "user u1: the broker holds"}},
		} {
			t.Run(c.name, func(t *testing.T) {
				got := good()
				c.change(got)
				users, deleted, failures := l.checkEvents(got)
				if users != 2 || deleted != 1 {
					t.Errorf("%d users, %d deleted; want 2 and 1", users, deleted)
				}
				wantFailures(t, failures, c.want)
			})
		}
	})
}

// wantFailures checks that failures are as many as want, each starting
// with its want.
func wantFailures(t *testing.T, failures, want []string) {
	t.Helper()
	if len(failures) != len(want) {
		t.Fatalf("failures %q, want %d starting with %q", failures, len(want), want)
	}
	for i := range want {
		if !strings.HasPrefix(failures[i], want[i]) {
			t.Errorf("failure %q, want it to start with %q", failures[i], want[i])
		}
	}
}
