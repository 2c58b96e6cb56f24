package soak

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// Limits of the trends, after warm-up.
const (
	// maxGrowth is how much memory and the outbox may grow, last window
	// over first.
	maxGrowth = 1.25
	// minDrainRatio is the least drain throughput at the end over the
	// start.
	minDrainRatio = 0.90
	// awayGrace is how long after PostgreSQL is back a 503 still counts
	// as the database's: pools find their broken connections as they use
	// them.
	awayGrace = 15 * time.Second
)

// check holds the run to the ledger and the trends, filling res.
func (s *soak) check(res *Result, steadyFrom, steadyTo time.Time) {
	fail := func(format string, args ...any) { res.Failures = append(res.Failures, fmt.Sprintf(format, args...)) }

	received, repeats, problems := s.mail.received()
	res.Repeats = repeats
	for _, n := range received {
		res.MailsReceived += n
	}
	expected, failures := s.ledger.checkMails(received)
	res.MailsExpected = expected
	res.Failures = append(res.Failures, problems...)
	res.Failures = append(res.Failures, failures...)

	events, eventRepeats, malformed := s.broker.events()
	res.EventRepeats = eventRepeats
	for _, e := range events {
		res.Events += len(e)
	}
	if len(malformed) > 0 {
		fail("%d messages in the stream are not CloudEvents of a user, the first: %s", len(malformed), malformed[0])
	}
	users, deleted, failures := s.ledger.checkEvents(events)
	res.Users, res.Deleted = users, deleted
	res.Failures = append(res.Failures, failures...)

	s.ledger.mu.Lock()
	res.Requests, res.Accepted = s.ledger.requests, s.ledger.accepted
	res.Statuses = map[int]int{}
	for k, v := range s.ledger.statuses {
		res.Statuses[k] = v
	}
	res.Failures = append(res.Failures, s.ledger.bad...)
	var strange []string
	for what, n := range s.ledger.unexpected {
		strange = append(strange, fmt.Sprintf("%d× %s", n, what))
	}
	sort.Strings(strange)
	for _, w := range strange {
		fail("unexpected answer: %s", w)
	}
	unavailables := slicesClone(s.ledger.unavailables)
	all := slicesClone(s.ledger.all)
	s.ledger.mu.Unlock()
	res.LatencyP50, res.LatencyP99 = quantile(all, 0.50), quantile(all, 0.99)

	faults := s.faults.all()
	away := func(at time.Time) bool {
		for _, f := range faults {
			if f.kind == "postgres" && !at.Before(f.at.Add(-time.Second)) && at.Before(f.until.Add(awayGrace)) {
				return true
			}
		}
		return false
	}
	outside := map[string]int{}
	during := 0
	for _, u := range unavailables {
		if away(u.at) {
			during++
		} else {
			outside[u.problemType]++
		}
	}
	if during > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d answers were 503 with Retry-After while PostgreSQL was away", during))
	}
	for typ, n := range outside {
		fail("%d answers were 503 %s while PostgreSQL was up", n, typ)
	}
	if res.Stalled > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d flows stopped before their end (the ledger keeps what they were promised)", res.Stalled))
	}

	samples, _ := s.samples.all()
	trend := func(name string, f func(sample) float64) float64 {
		from := steadyFrom.Add(s.cfg.Warmup)
		w := max((steadyTo.Sub(from))/6, 3*s.cfg.SampleEvery)
		first, n1 := windowMean(samples, from, from.Add(w), f)
		last, n2 := windowMean(samples, steadyTo.Add(-w), steadyTo, f)
		g := ratio(last, first)
		msg := fmt.Sprintf("%s: %.2f in the first %s after warm-up, %.2f in the last (x%.2f; %d and %d samples)", name, first, w.Round(time.Second), last, g, n1, n2)
		switch {
		case !s.cfg.CheckTrends:
			res.Notes = append(res.Notes, msg+" (not checked)")
		case n1 == 0 || n2 == 0 || math.IsNaN(g):
			fail("%s: too few samples to tell a trend", name)
		case g > maxGrowth:
			fail("%s grew more than %.0f%%", msg, (maxGrowth-1)*100)
		default:
			res.Notes = append(res.Notes, msg)
		}
		return g
	}
	res.RSSGrowth = trend("memory of instance 0, never killed (MiB)", func(x sample) float64 { return x.rss[0] })
	res.OutboxGrowth = trend("outbox table size (MiB)", func(x sample) float64 { return x.outboxMiB })
	r := ratio(res.DrainEnd, res.DrainStart)
	msg := fmt.Sprintf("drain: %.0f mails/s at the start, %.0f at the end (x%.2f)", res.DrainStart, res.DrainEnd, r)
	switch {
	case !s.cfg.CheckTrends:
		res.Notes = append(res.Notes, msg+" (not checked)")
	case !(r >= minDrainRatio):
		fail("%s, below %.0f%%", msg, minDrainRatio*100)
	default:
		res.Notes = append(res.Notes, msg)
	}
}
