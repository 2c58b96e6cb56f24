package soak

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/eventsourced/accounts/internal/user/integration"
)

// The integration events the ledger expects.
const (
	evRegistered   = integration.TypeRegistered
	evSignedIn     = integration.TypeSignedIn
	evEmailChanged = integration.TypeEmailChanged
	evDeleted      = integration.TypeDeleted
)

// step is an integration event the ledger expects of a user; an optional
// one follows a request whose outcome is unknown.
type step struct {
	typ      string
	optional bool
}

// expect counts the mails an address should get of one kind: at least
// required, and at most required and optional.
type expect struct{ required, optional int }

// unavailable is one 503 answer.
type unavailable struct {
	at          time.Time
	problemType string
}

// latency is one answer's time.
type latency struct {
	at   time.Time
	took time.Duration
}

// ledger records every answer and what each accepted request promised.
type ledger struct {
	mu           sync.Mutex
	requests     int
	accepted     int
	statuses     map[int]int
	bad          []string
	unavailables []unavailable
	unexpected   map[string]int
	mails        map[string]*expect
	users        map[string][]step
	deleted      map[string]bool
	unknownUsers int
	recent       []latency
	all          []time.Duration
}

func newLedger() *ledger {
	return &ledger{statuses: map[int]int{}, unexpected: map[string]int{}, mails: map[string]*expect{},
		users: map[string][]step{}, deleted: map[string]bool{}}
}

// answer records one answer of an instance.
func (l *ledger) answer(method, path string, status int, retryAfter string, body []byte, at time.Time, took time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	l.statuses[status]++
	l.recent = append(l.recent, latency{at: at, took: took})
	l.all = append(l.all, took)
	if status >= 200 && status < 300 {
		l.accepted++
	}
	switch {
	case status == 503 && retryAfter == "":
		l.bad = append(l.bad, fmt.Sprintf("%s %s answered 503 without Retry-After at %s", method, path, at.UTC().Format(time.TimeOnly)))
	case status == 503:
		var p struct {
			Type string `json:"type"`
		}
		_ = json.Unmarshal(body, &p)
		l.unavailables = append(l.unavailables, unavailable{at: at, problemType: p.Type})
	case status >= 500:
		l.bad = append(l.bad, fmt.Sprintf("%s %s answered %d at %s: %.200s", method, path, status, at.UTC().Format(time.TimeOnly), body))
	}
}

// mail records that a request asked for a mail of kind to the address.
func (l *ledger) mail(to, kind string, optional bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.mails[to+" "+kind]
	if e == nil {
		e = &expect{}
		l.mails[to+" "+kind] = e
	}
	if optional {
		e.optional++
	} else {
		e.required++
	}
}

// event records an integration event expected of the user.
func (l *ledger) event(user, typ string, optional bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.users[user] = append(l.users[user], step{typ: typ, optional: optional})
	if typ == evDeleted && !optional {
		l.deleted[user] = true
	}
}

// unknownUser records a first sign-in whose outcome is unknown: an account
// the ledger cannot name may have been made.
func (l *ledger) unknownUser() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unknownUsers++
}

// strange records an answer the flow did not expect.
func (l *ledger) strange(what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unexpected[what]++
}

// required is how many events the user must have.
func (l *ledger) required(user string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.users[user] {
		if !s.optional {
			n++
		}
	}
	return n
}

// takeLatencies returns the answers' times since the last call.
func (l *ledger) takeLatencies() []latency {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.recent
	l.recent = nil
	return out
}

type ledgerStats struct{ requests, accepted int }

func (l *ledger) stats() ledgerStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return ledgerStats{requests: l.requests, accepted: l.accepted}
}

// matches tells whether the events, in the order the broker holds them,
// are the steps in order, optional steps maybe missing.
func matches(steps []step, events []string) bool {
	if len(events) == 0 {
		for _, s := range steps {
			if !s.optional {
				return false
			}
		}
		return true
	}
	if len(steps) == 0 {
		return false
	}
	if steps[0].typ == events[0] && matches(steps[1:], events[1:]) {
		return true
	}
	return steps[0].optional && matches(steps[1:], events)
}

// checkMails compares the mails asked for with the mails received.
func (l *ledger) checkMails(received map[string]int) (expected int, failures []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []string
	for k := range l.mails {
		keys = append(keys, k)
	}
	for k := range received {
		if l.mails[k] == nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		e, got := l.mails[k], received[k]
		if e == nil {
			failures = append(failures, fmt.Sprintf("mail nobody asked for: %d to %s", got, k))
			continue
		}
		expected += e.required
		switch {
		case got < e.required:
			failures = append(failures, fmt.Sprintf("lost mail: %s got %d of %d", k, got, e.required))
		case got > e.required+e.optional:
			failures = append(failures, fmt.Sprintf("extra mail: %s got %d distinct Message-IDs, at most %d asked for", k, got, e.required+e.optional))
		}
	}
	return expected, failures
}

// checkEvents compares the events expected of each user with those the
// broker holds.
func (l *ledger) checkEvents(got map[string][]brokerEvent) (users, deleted int, failures []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ids []string
	for id := range l.users {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		steps, events := l.users[id], got[id]
		var types []string
		lastVersion := 0
		for _, e := range events {
			types = append(types, e.typ)
			if e.version <= lastVersion {
				failures = append(failures, fmt.Sprintf("user %s: %s version %d came after version %d", id, e.typ, e.version, lastVersion))
			}
			lastVersion = e.version
		}
		if !matches(steps, types) {
			var want []string
			for _, s := range steps {
				t := s.typ
				if s.optional {
					t += "?"
				}
				want = append(want, t)
			}
			failures = append(failures, fmt.Sprintf("user %s: the broker holds %v, the ledger expects %v", id, types, want))
		}
	}
	var strangers []string
	for id := range got {
		if _, ok := l.users[id]; !ok {
			strangers = append(strangers, id)
		}
	}
	if len(strangers) > l.unknownUsers {
		sort.Strings(strangers)
		failures = append(failures, fmt.Sprintf("events of %d users the ledger does not know (at most %d first sign-ins had an unknown outcome): %v", len(strangers), l.unknownUsers, strangers[:min(5, len(strangers))]))
	}
	return len(l.users), len(l.deleted), failures
}
