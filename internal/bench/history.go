package bench

import (
	"container/heap"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/requestid"
	"github.com/eventsourced/accounts/internal/uow"
	"github.com/eventsourced/accounts/internal/user"
)

// The history that the growth benchmark loads is that of a service some
// two years old, as its database holds it with the sweep on (its
// default): every account's stream ("user-ID") with its registration, its
// sessions started and ended, its changes of address asked for, made and
// now and then undone, or, for an erased account, the one [user.Erased]
// its erasure left; every mailbox's sign-in stream ("signin-HASH") as the
// sweep leaves it, the one [user.SignInForgotten] that ends its history,
// besides those of the last minutes, which still hold their links asked
// for and used; and the sign-in streams of addresses that asked for a link
// and never used it. Addresses are sealed as the service seals them, with
// a data key per stream and unit of work, and the keys that the sweep and
// the erasures forget are gone.
const (
	// historySpan is about how long the history runs.
	historySpan = 2 * 365 * 24 * time.Hour
	// sweptAfter is when the sweep forgets a sign-in stream: past the
	// longer of LinkWindow and LinkTTL, and its margin.
	sweptAfter = 20 * time.Minute
	// linkTTL and sessionTTL are the service's defaults.
	linkTTL    = 15 * time.Minute
	sessionTTL = 30 * 24 * time.Hour
)

// accountKind is how often a kind of account signs in, and its share of
// accounts.
type accountKind struct {
	share float64
	every time.Duration
}

// accountKinds: most sign in monthly or weekly, a few daily, and a very
// few, scripts or people who never keep a session, as often as the link
// limit lets them for hours on end. Those few make the longest streams.
var accountKinds = []accountKind{
	{0.698, 30 * 24 * time.Hour},
	{0.25, 7 * 24 * time.Hour},
	{0.05, 24 * time.Hour},
	{0.002, time.Hour},
}

// Chances of what a sign-in brings with it.
const (
	pSignOut      = 0.6  // the previous session was signed out
	pEndedByOwner = 0.05 // or ended from another session
	pChange       = 0.02 // a change of address is asked for
	pConfirmed    = 0.8  // and confirmed
	pUndone       = 0.05 // and then undone
	pErased       = 0.01 // the account is erased, after some sessions
	pStranger     = 0.1  // an address that never signs in asks for a link
)

// spec is an event of the history before it is sealed and encoded: its
// stream, version and time, its type and what its data holds.
type spec struct {
	stream  string
	version int64
	at      time.Time
	typ     string
	account *account
	// email, other: addresses in the clear, sealed as the writer writes
	// them; hash, other hashes: codes and tokens.
	email, other string
	hash, hash2  string
	reason       string
	client       string
}

// account is an account of the history, as the generator follows it.
type account struct {
	id      uuid.UUID
	n       int // its number, which makes its addresses
	stream  string
	signIn  string
	version int64 // of its user stream
	// signInVersion is its sign-in stream's; cycles its sign-ins.
	signInVersion int64
	every         time.Duration
	next          time.Time
	live          string // the token hash of its live session, if any
	changes       int    // addresses it moved to
	email         string
	erasedAfter   int // sessions before its erasure, 0: never
	sessions      int
	// lastLink is when it last asked for a link; markVersion and markAt
	// the version and time of the marker of the last sweep of its
	// sign-in stream, which drops every event before it.
	lastLink    time.Time
	markVersion int64
	markAt      time.Time
	erasedAt    time.Time
	index       int // in the heap
}

// history generates the events of the history in the order of their
// times. It is deterministic for a seed.
type history struct {
	rng    *rand.Rand
	prefix string // makes addresses distinct from another history's
	now    time.Time
	queue  accountQueue
	// pending are the events of the last sweptAfter, which the sweep has
	// not reached yet: a sign-in's events of its sign-in stream are
	// dropped when they leave it, and every other event written.
	pending []spec
	// added counts the accounts; want is the events to generate, emitted
	// those handed out, and markers the markers still to write, at most
	// one a sign-in stream.
	added, want, emitted, markers int
	// erased are the erased accounts, whose markers are still to write.
	erased []*account
	// arrival is the time between two new accounts.
	arrival  time.Duration
	nextNew  time.Time
	users    []string // a sample of the user streams
	signIns  []string // and of the sign-in streams
	sampled  int
	finished bool
}

// newHistory returns the generator of a history of n events that ends
// about now. Addresses begin with prefix.
func newHistory(seed uint64, prefix string, n int, now time.Time) *history {
	// An account makes about 100 events over the history in this mix,
	// arriving at an even pace: new accounts arrive so that the history
	// holds n events after historySpan.
	accounts := max(n/100, 1)
	h := &history{
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), prefix: prefix, want: n, now: now,
		arrival: historySpan / time.Duration(accounts),
	}
	h.nextNew = now.Add(-historySpan)
	return h
}

// hashOf returns a hash-shaped string, 64 hex digits, from the generator.
func (h *history) hashOf() string {
	var b [32]byte
	for i := 0; i < 32; i += 8 {
		v := h.rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return hex.EncodeToString(b[:])
}

// signInName returns a name of a sign-in stream's shape.
func (h *history) signInName() string { return "signin-" + h.hashOf()[:32] }

// next returns the next batch of up to n events, in order of time, and
// false once the history is done.
func (h *history) next(n int) []spec {
	var out []spec
	for len(out) < n && !h.finished {
		out = append(out, h.step()...)
	}
	return out
}

// step generates the next action, and returns what left the window of the
// sweep meanwhile, or, at the end, everything.
func (h *history) step() []spec {
	// The accounts still to sign in, and the markers of those that
	// signed in, must fit in what is left.
	// An action adds at most 9 events and a marker.
	if h.want-h.emitted-len(h.pending)-h.markers < 16 {
		return h.finish()
	}
	var at time.Time
	var a *account
	newcomer := len(h.queue) == 0 || h.nextNew.Before(h.queue[0].next)
	if (newcomer && h.nextNew.After(h.now)) || (!newcomer && h.queue[0].next.After(h.now)) {
		// The history has reached now: strangers' markers fill it up.
		return h.finish()
	}
	if newcomer {
		at = h.nextNew
		h.nextNew = h.nextNew.Add(time.Duration(h.rng.ExpFloat64() * float64(h.arrival)))
		a = h.newAccount()
		a.next = at
		heap.Push(&h.queue, a)
	} else {
		a = h.queue[0]
		at = a.next
	}
	h.act(a, at)
	if !a.erasedAt.IsZero() {
		heap.Remove(&h.queue, a.index)
		h.erased = append(h.erased, a)
	} else {
		a.next = at.Add(time.Duration(h.rng.ExpFloat64() * float64(a.every)))
		heap.Fix(&h.queue, a.index)
	}
	return h.release(at.Add(-sweptAfter))
}

// newAccount makes an account of a kind drawn by its share.
func (h *history) newAccount() *account {
	h.added++
	a := &account{id: uuid.New(), n: h.added}
	a.stream = "user-" + a.id.String()
	a.signIn = h.signInName()
	a.email = fmt.Sprintf("%s%d@example.com", h.prefix, a.n)
	r := h.rng.Float64()
	for _, k := range accountKinds {
		a.every = k.every
		if r < k.share {
			break
		}
		r -= k.share
	}
	if h.rng.Float64() < pErased {
		a.erasedAfter = 1 + h.rng.IntN(20)
	}
	h.sample(a)
	return a
}

// sample keeps a sample of the streams, for the loads.
func (h *history) sample(a *account) {
	const size = 2000
	h.sampled++
	if len(h.users) < size {
		h.users, h.signIns = append(h.users, a.stream), append(h.signIns, a.signIn)
		return
	}
	if i := h.rng.IntN(h.sampled); i < size {
		h.users[i], h.signIns[i] = a.stream, a.signIn
	}
}

// act generates a's sign-in at at, and what comes with it.
func (h *history) act(a *account, at time.Time) {
	// The link asked for and used, in the sign-in stream, after the
	// marker of the sweep that forgot the last ones, if it ran since.
	switch {
	case a.lastLink.IsZero():
		h.markers++
	case at.Sub(a.lastLink) >= sweptAfter:
		a.signInVersion++
		a.markVersion, a.markAt = a.signInVersion, a.lastLink.Add(sweptAfter)
	}
	h.add(spec{stream: a.signIn, version: a.signInVersion + 1, at: at, typ: user.TypeSignInLinkRequested, account: a, email: a.email, hash: h.hashOf()})
	h.add(spec{stream: a.signIn, version: a.signInVersion + 2, at: at, typ: user.TypeSignInLinkUsed, account: a, hash: h.hashOf()})
	a.signInVersion += 2
	a.lastLink = at
	if h.rng.Float64() < pStranger {
		// Another address asks once, and never uses its link.
		h.add(spec{stream: h.signInName(), version: 1, at: at, typ: user.TypeSignInLinkRequested, email: fmt.Sprintf("%sstranger%d@example.net", h.prefix, h.added), hash: h.hashOf()})
	}

	if a.sessions == 0 {
		h.user(a, at, spec{typ: user.TypeRegistered, email: a.email})
	} else {
		switch r := h.rng.Float64(); {
		case a.live == "":
		case r < pSignOut:
			h.user(a, at, spec{typ: user.TypeSessionEnded, hash: a.live})
		case r < pSignOut+pEndedByOwner:
			h.user(a, at, spec{typ: user.TypeSessionEnded, hash: a.live, reason: user.EndedByOwner})
		}
	}
	clients := [...]string{"Firefox on Linux", "Chrome on Windows", "Safari on iPhone", "Chrome on Android", "Safari on macOS", "Edge on Windows"}
	a.sessions++
	a.live = h.hashOf()
	h.user(a, at, spec{typ: user.TypeSessionStarted, hash: a.live, client: clients[h.rng.IntN(len(clients))]})
	if h.rng.Float64() < pChange {
		h.change(a, at)
	}
	if a.erasedAfter > 0 && a.sessions >= a.erasedAfter {
		h.erase(a, at)
	}
}

// user appends s to a's stream at at. The stream of an account that is
// to be erased keeps nothing of it but its erasure.
func (h *history) user(a *account, at time.Time, s spec) {
	a.version++
	if a.erasedAfter > 0 {
		return
	}
	s.stream, s.version, s.at, s.account = a.stream, a.version, at, a
	h.add(s)
}

// change asks for a change of a's address, and maybe confirms it, and
// maybe undoes that.
func (h *history) change(a *account, at time.Time) {
	to := fmt.Sprintf("%s%d.%d@example.org", h.prefix, a.n, a.changes+1)
	h.user(a, at, spec{typ: user.TypeEmailChangeRequested, email: to, hash: h.hashOf()})
	code := h.hashOf()
	if a.erasedAfter == 0 {
		code = h.pending[len(h.pending)-1].hash
	}
	if h.rng.Float64() >= pConfirmed {
		return
	}
	old := a.email
	a.changes++
	a.email = to
	h.user(a, at, spec{typ: user.TypeEmailChanged, email: to, other: old, hash: code, hash2: h.hashOf()})
	undo := h.hashOf()
	if a.erasedAfter == 0 {
		undo = h.pending[len(h.pending)-1].hash2
	}
	if h.rng.Float64() >= pUndone {
		return
	}
	a.email = old
	h.user(a, at, spec{typ: user.TypeEmailChangeUndone, email: old, hash: undo})
	h.user(a, at, spec{typ: user.TypeSessionEnded, hash: a.live, reason: user.EndedByUndo})
	a.live = ""
}

// erase erases a: its user stream keeps only its [user.Erased], and its
// sign-in stream a marker.
func (h *history) erase(a *account, at time.Time) {
	kept := h.pending[:0]
	for _, s := range h.pending {
		if s.account != a {
			kept = append(kept, s)
		}
	}
	h.pending = kept
	a.erasedAt = at
	a.version++
	h.add(spec{stream: a.stream, version: a.version, at: at, typ: user.TypeErased, account: a})
}

func (h *history) add(s spec) { h.pending = append(h.pending, s) }

// release returns the events recorded before horizon: the sweep dropped
// those of sign-ins, and the events of the others stay.
func (h *history) release(horizon time.Time) []spec {
	i := 0
	for i < len(h.pending) && h.pending[i].at.Before(horizon) {
		i++
	}
	out := make([]spec, 0, i)
	for _, s := range h.pending[:i] {
		switch {
		case s.typ == user.TypeSignInLinkRequested && s.account == nil:
			// A stranger's: the sweep left its marker.
			out = append(out, spec{stream: s.stream, version: 2, at: s.at.Add(sweptAfter), typ: user.TypeSignInForgotten})
		case s.typ != user.TypeSignInLinkRequested && s.typ != user.TypeSignInLinkUsed:
			out = append(out, s)
		}
	}
	h.pending = append(h.pending[:0], h.pending[i:]...)
	h.emitted += len(out)
	return out
}

// finish returns what is left: the markers of the sign-in streams the
// sweep forgot, those of strangers until the history holds want events,
// and then the events of the last minutes, which it has not reached.
func (h *history) finish() []spec {
	h.finished = true
	end := h.now.Add(-historySpan)
	if len(h.pending) > 0 {
		end = h.pending[len(h.pending)-1].at
	}
	var out []spec
	mark := func(a *account, v int64, at time.Time) {
		if v > 0 {
			out = append(out, spec{stream: a.signIn, version: v, at: at, typ: user.TypeSignInForgotten})
		}
	}
	for _, a := range h.queue {
		if a.lastLink.IsZero() {
			continue
		}
		if end.Sub(a.lastLink) >= sweptAfter {
			mark(a, a.signInVersion+1, a.lastLink.Add(sweptAfter))
		} else {
			// Its last links are in the tail, after the last sweep.
			mark(a, a.markVersion, a.markAt)
		}
	}
	for _, a := range h.erased {
		// The erasure forgot the stream after the sign-in's link.
		mark(a, a.signInVersion+1, a.erasedAt)
	}
	for range max(h.want-h.emitted-len(out)-len(h.pending), 0) {
		out = append(out, spec{stream: h.signInName(), version: 2, at: end.Add(-historySpan / 2), typ: user.TypeSignInForgotten})
	}
	out = append(out, h.pending...)
	h.emitted += len(out)
	h.pending = nil
	return out
}

// event returns s as an event of the log, its addresses sealed with keys
// as part of tx, whose context keeps the keys ([keyring.Within]).
func (s spec) event(ctx context.Context, tx uow.Tx, keys *keyring.Keyring) (eventstore.Event, error) {
	var data any
	var id uuid.UUID
	if s.account != nil {
		id = s.account.id
	}
	seal := func(subject, address string) (string, error) { return keys.Seal(ctx, tx, subject, address) }
	switch s.typ {
	case user.TypeSignInLinkRequested:
		sealed, err := keys.SealUntil(ctx, tx, s.stream, s.email, s.at.Add(sweptAfter))
		if err != nil {
			return eventstore.Event{}, err
		}
		data = user.SignInLinkRequested{Email: sealed, CodeHash: s.hash, RequestedAt: s.at.UTC().Truncate(time.Microsecond), ExpiresAt: s.at.Add(linkTTL)}
	case user.TypeSignInLinkUsed:
		data = user.SignInLinkUsed{CodeHash: s.hash, UserID: id}
	case user.TypeSignInForgotten:
		data = user.SignInForgotten{}
	case user.TypeRegistered:
		sealed, err := seal(s.stream, s.email)
		if err != nil {
			return eventstore.Event{}, err
		}
		data = user.Registered{UserID: id, Email: sealed}
	case user.TypeSessionStarted:
		hash, err := user.ParseTokenHash(s.hash)
		if err != nil {
			return eventstore.Event{}, err
		}
		data = user.SessionStarted{TokenHash: hash, ExpiresAt: s.at.Add(sessionTTL), Client: s.client}
	case user.TypeSessionEnded:
		hash, err := user.ParseTokenHash(s.hash)
		if err != nil {
			return eventstore.Event{}, err
		}
		data = user.SessionEnded{TokenHash: hash, Reason: s.reason}
	case user.TypeEmailChangeRequested:
		// The sweep forgot the change's key once it could no longer be
		// confirmed: the address is sealed, and its key gone.
		subject := "change-" + s.hash
		sealed, err := seal(subject, s.email)
		if err != nil {
			return eventstore.Event{}, err
		}
		if _, err := keys.Forget(ctx, tx, subject); err != nil {
			return eventstore.Event{}, err
		}
		data = user.EmailChangeRequested{UserID: id, NewEmail: sealed, CodeHash: s.hash, ExpiresAt: s.at.Add(linkTTL)}
	case user.TypeEmailChanged:
		to, err := seal(s.stream, s.email)
		if err != nil {
			return eventstore.Event{}, err
		}
		from, err := seal(s.stream, s.other)
		if err != nil {
			return eventstore.Event{}, err
		}
		data = user.EmailChanged{UserID: id, OldEmail: from, NewEmail: to, CodeHash: s.hash, UndoCodeHash: s.hash2, UndoExpiresAt: s.at.Add(7 * 24 * time.Hour)}
	case user.TypeEmailChangeUndone:
		sealed, err := seal(s.stream, s.email)
		if err != nil {
			return eventstore.Event{}, err
		}
		data = user.EmailChangeUndone{UserID: id, Email: sealed, CodeHash: s.hash}
	case user.TypeErased:
		data = user.Erased{UserID: id}
	default:
		return eventstore.Event{}, fmt.Errorf("bench: history: no event of type %s", s.typ)
	}
	e, err := user.Events().New(data, s.metadata())
	if err != nil {
		return eventstore.Event{}, err
	}
	e.Stream, e.Version, e.RecordedAt = s.stream, s.version, s.at.UTC().Truncate(time.Microsecond)
	return e, nil
}

// causes are the commands that append each type, as the events' metadata
// name them (aggregate.Metadata).
var causes = map[string]string{
	user.TypeSignInLinkRequested:  "user.RequestSignInLink",
	user.TypeSignInLinkUsed:       "user.SignIn",
	user.TypeRegistered:           "user.SignIn",
	user.TypeSessionStarted:       "user.SignIn",
	user.TypeSessionEnded:         "user.SignOut",
	user.TypeEmailChangeRequested: "user.RequestEmailChange",
	user.TypeEmailChanged:         "user.ConfirmEmailChange",
	user.TypeEmailChangeUndone:    "user.UndoEmailChange",
	user.TypeErased:               "user.DeleteAccount",
	user.TypeSignInForgotten:      "user.ForgetIdleAddresses",
}

// metadata returns what the service's commands write beside the event:
// the request that caused it, none for the sweep's, and the command.
func (s spec) metadata() eventstore.Metadata {
	md := eventstore.Metadata{CausationID: causes[s.typ]}
	if s.typ != user.TypeSignInForgotten {
		md.CorrelationID = requestid.New()
	}
	return md
}

// accountQueue orders accounts by their next sign-in (container/heap).
type accountQueue []*account

func (q accountQueue) Len() int           { return len(q) }
func (q accountQueue) Less(i, j int) bool { return q[i].next.Before(q[j].next) }
func (q accountQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}
func (q *accountQueue) Push(x any) {
	a := x.(*account)
	a.index = len(*q)
	*q = append(*q, a)
}
func (q *accountQueue) Pop() any {
	old := *q
	a := old[len(old)-1]
	*q = old[:len(old)-1]
	return a
}
