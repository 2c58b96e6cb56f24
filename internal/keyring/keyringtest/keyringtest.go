// Package keyringtest is the conformance suite of [keyring.Store]: every
// backend runs it, through a [keyring.Keyring], against its real database.
package keyringtest

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/keyring"
	"github.com/eventsourced/accounts/internal/uow"
)

// Harness is what the suite needs of a backend: a runner of units of work
// on a fresh database, and the store of data keys on it.
type Harness struct {
	Runner uow.Runner
	Store  keyring.Store
}

// Run runs every case, each on the harness that setup returns.
func Run(t *testing.T, setup func(t *testing.T) Harness) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"SealOpen/RoundTrip", testRoundTrip},
		{"SealOpen/BoundToSubject", testBoundToSubject},
		{"Forget/Erases", testForgetErases},
		{"Seal/ConcurrentSealsAllOpen", testConcurrentSeals},
		{"Rotate/RewrapsEveryKey", testRotate},
		{"ReadOnly/SealRefused", testReadOnly},
		{"SealUntil/ExpiredSubjects", testExpiredSubjects},
		{"SealUntil/ForgetExpired", testForgetExpired},
		{"Secret/StableAndSecret", testSecret},
		{"Within/OneReadPerUnitOfWork", testWithin},
		{"Check/RefusesMasterKeysThatUnwrapNothing", testCheck},
		{"Check/FillsInRecordsWithoutACheck", testCheckUnchecked},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, setup(t))
		})
	}
}

// masters returns the master keys of DATA_KEY value s.
func masters(t *testing.T, ids ...string) keyring.Masters {
	t.Helper()
	var parts []string
	for _, id := range ids {
		parts = append(parts, testKeys[id])
	}
	m, err := keyring.ParseMasters(strings.Join(parts, ","))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testKeys are fixed master keys, by ID.
var testKeys = map[string]string{
	"a": "a:" + strings.Repeat("A", 43),
	"b": "b:" + strings.Repeat("B", 43),
	// another-a is another key under the ID a.
	"another-a": "a:" + strings.Repeat("C", 43),
}

func ring(t *testing.T, h Harness, ids ...string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.New(masters(t, ids...), h.Store)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func do(t *testing.T, h Harness, fn func(ctx context.Context, tx uow.Tx) error) {
	t.Helper()
	if err := h.Runner.Do(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

func seal(t *testing.T, h Harness, k *keyring.Keyring, subject, plain string) string {
	t.Helper()
	var sealed string
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		var err error
		sealed, err = k.Seal(ctx, tx, subject, plain)
		return err
	})
	return sealed
}

func open(t *testing.T, h Harness, k *keyring.Keyring, subject, sealed string) (string, bool, error) {
	t.Helper()
	var plain string
	var ok bool
	err := h.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		var err error
		plain, ok, err = k.Open(ctx, tx, subject, sealed)
		return err
	})
	return plain, ok, err
}

func wantOpen(t *testing.T, h Harness, k *keyring.Keyring, subject, sealed, want string) {
	t.Helper()
	got, ok, err := open(t, h, k, subject, sealed)
	if err != nil || !ok || got != want {
		t.Errorf("Open(%s) = %q, %v, %v; want %q", subject, got, ok, err, want)
	}
}

// A sealed value hides its plaintext, differs at each seal, and opens to
// the plaintext.
func testRoundTrip(t *testing.T, h Harness) {
	k := ring(t, h, "a")
	one := seal(t, h, k, "user:1", "ada@example.com")
	two := seal(t, h, k, "user:1", "ada@example.com")
	// Random base64 holds "ada" now and then; never "@".
	if one == two || strings.Contains(one, "ada@example.com") || !keyring.Sealed(one) {
		t.Errorf("sealed values %q and %q: want two different values that hide the address", one, two)
	}
	wantOpen(t, h, k, "user:1", one, "ada@example.com")
	wantOpen(t, h, k, "user:1", two, "ada@example.com")
	wantOpen(t, h, k, "user:1", seal(t, h, k, "user:1", ""), "")
}

// A value opens only as its own subject's (as another's it reads as
// erased, since it never was that subject's), and not once changed.
func testBoundToSubject(t *testing.T, h Harness) {
	k := ring(t, h, "a")
	sealed := seal(t, h, k, "user:1", "ada@example.com")
	seal(t, h, k, "user:2", "bob@example.com")
	if got, ok, _ := open(t, h, k, "user:2", sealed); ok || got == "ada@example.com" {
		t.Errorf("user:1's value opened as user:2's: %q", got)
	}
	tampered := sealed[:len(sealed)-2] + map[bool]string{true: "AA", false: "BB"}[!strings.HasSuffix(sealed, "AA")]
	if got, _, err := open(t, h, k, "user:1", tampered); err == nil {
		t.Errorf("a changed value opened: %q", got)
	}
	for _, bad := range []string{"ada@example.com", "enc:v1:", "enc:v1:!!"} {
		if got, _, err := open(t, h, k, "user:1", bad); err == nil {
			t.Errorf("Open(%q) = %q, want an error", bad, got)
		}
	}
}

// Forget erases every value sealed for the subject, and only for it; a
// subject sealed for again after it has a new key, which does not open the
// values of the old one either.
func testForgetErases(t *testing.T, h Harness) {
	k := ring(t, h, "a")
	ada := seal(t, h, k, "user:1", "ada@example.com")
	bob := seal(t, h, k, "user:2", "bob@example.com")
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		ok, err := k.Forget(ctx, tx, "user:1")
		if err == nil && !ok {
			t.Error("Forget(user:1) found no key")
		}
		return err
	})
	if got, ok, err := open(t, h, k, "user:1", ada); err != nil || ok || got != keyring.Erased {
		t.Errorf("Open of a forgotten subject's value = %q, %v, %v; want %q, false, no error", got, ok, err, keyring.Erased)
	}
	wantOpen(t, h, k, "user:2", bob, "bob@example.com")
	again := seal(t, h, k, "user:1", "ada.again@example.com")
	wantOpen(t, h, k, "user:1", again, "ada.again@example.com")
	if got, ok, err := open(t, h, k, "user:1", ada); err != nil || ok || got != keyring.Erased {
		t.Errorf("Open of a value of the forgotten key, under the new key = %q, %v, %v; want erased", got, ok, err)
	}
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		ok, err := k.Forget(ctx, tx, "user:3")
		if ok {
			t.Error("Forget of a subject with no key found one")
		}
		return err
	})
}

// Units of work that seal for one subject at once each make a key, and
// every value they sealed opens.
func testConcurrentSeals(t *testing.T, h Harness) {
	k := ring(t, h, "a")
	const n = 8
	sealed := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
				var err error
				sealed[i], err = k.Seal(ctx, tx, "user:new", "ada@example.com")
				return err
			})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("seal %d: %v", i, errs[i])
			continue
		}
		wantOpen(t, h, k, "user:new", sealed[i], "ada@example.com")
	}
}

// Rotate rewraps every key with the current master key, a page at a time;
// then a keyring without the old master key opens every value.
func testRotate(t *testing.T, h Harness) {
	old := ring(t, h, "a")
	values := map[string]string{}
	for _, s := range []string{"user:1", "user:2", "user:3", "user:4", "user:5"} {
		values[s] = seal(t, h, old, s, s+"@example.com")
	}
	both := ring(t, h, "b", "a")
	for s, v := range values {
		wantOpen(t, h, both, s, v, s+"@example.com")
	}
	total := 0
	for range 10 {
		var n int
		do(t, h, func(ctx context.Context, tx uow.Tx) error {
			var err error
			n, err = both.Rotate(ctx, tx, 2)
			return err
		})
		if n > 2 {
			t.Fatalf("Rotate(limit 2) rewrapped %d", n)
		}
		if n == 0 {
			break
		}
		total += n
	}
	if total != len(values) {
		t.Errorf("Rotate rewrapped %d keys in all, want %d", total, len(values))
	}
	onlyNew := ring(t, h, "b")
	for s, v := range values {
		wantOpen(t, h, onlyNew, s, v, s+"@example.com")
	}
	if _, _, err := open(t, h, old, "user:1", values["user:1"]); err == nil {
		t.Error("a keyring with only the old master key opened a rewrapped key")
	}
}

// A read-only unit of work cannot seal: a seal makes the subject's key
// or sets when it expires. It can open.
func testReadOnly(t *testing.T, h Harness) {
	k := ring(t, h, "a")
	sealed := seal(t, h, k, "user:1", "ada@example.com")
	for _, subject := range []string{"user:1", "user:2"} {
		err := h.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
			_, err := k.Seal(ctx, tx, subject, "ada@example.com")
			return err
		})
		if !errors.Is(err, uow.ErrReadOnly) {
			t.Errorf("Seal for %s in a read-only unit of work: %v, want uow.ErrReadOnly", subject, err)
		}
	}
	wantOpen(t, h, k, "user:1", sealed, "ada@example.com")
}

// ExpiredSubjects lists the subjects of a prefix all of whose keys' time
// has come, and only those: a later seal keeps a subject longer, and a
// subject with a key of Seal is never due; it pages by name.
func testExpiredSubjects(t *testing.T, h Harness) {
	k := ring(t, h, "a")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sealUntil := func(subject string, until time.Time) string {
		var sealed string
		do(t, h, func(ctx context.Context, tx uow.Tx) error {
			var err error
			sealed, err = k.SealUntil(ctx, tx, subject, subject+"@example.com", until)
			return err
		})
		return sealed
	}
	early := sealUntil("signin:early", t0.Add(time.Minute))
	moved := sealUntil("signin:moved", t0.Add(time.Minute))
	sealUntil("signin:moved", t0.Add(time.Hour))
	kept := seal(t, h, k, "user:kept", "user:kept@example.com")
	other := sealUntil("signin;other", t0.Add(time.Minute)) // Of another prefix.
	mixed := sealUntil("signin:mixed", t0.Add(time.Minute))
	seal(t, h, k, "signin:mixed", "kept")
	// forget forgets up to limit expired subjects, as a sweep does.
	forget := func(now time.Time, limit int) []string {
		var subjects []string
		do(t, h, func(ctx context.Context, tx uow.Tx) error {
			var err error
			if subjects, err = k.ExpiredSubjects(ctx, tx, "signin:", "", now, limit); err != nil {
				return err
			}
			for _, s := range subjects {
				if idle, err := k.Expired(ctx, tx, s, now); err != nil || !idle {
					t.Errorf("Expired(%s) = %v, %v; want true for a subject ExpiredSubjects listed", s, idle, err)
				}
				if _, err := k.Forget(ctx, tx, s); err != nil {
					return err
				}
			}
			return nil
		})
		if !slices.IsSorted(subjects) {
			t.Errorf("ExpiredSubjects = %v, want them in order", subjects)
		}
		return subjects
	}
	if got := forget(t0.Add(time.Minute-time.Microsecond), 10); len(got) != 0 {
		t.Errorf("ExpiredSubjects before any key's time = %v", got)
	}
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		for subject, want := range map[string]bool{"signin:early": true, "signin:moved": false, "signin:mixed": false, "user:kept": false, "signin:none": false} {
			if got, err := k.Expired(ctx, tx, subject, t0.Add(time.Minute)); err != nil || got != want {
				t.Errorf("Expired(%s) at the first key's time = %v, %v; want %v", subject, got, err, want)
			}
		}
		return nil
	})
	if got := forget(t0.Add(time.Minute), 10); !slices.Equal(got, []string{"signin:early"}) {
		t.Errorf("ExpiredSubjects at the first key's time = %v, want [signin:early]", got)
	}
	if got, ok, err := open(t, h, k, "signin:early", early); err != nil || ok || got != keyring.Erased {
		t.Errorf("Open of a value of an expired key = %q, %v, %v; want erased", got, ok, err)
	}
	wantOpen(t, h, k, "signin:moved", moved, "signin:moved@example.com")
	for _, s := range []string{"signin:a", "signin:b", "signin:c"} {
		sealUntil(s, t0.Add(time.Minute))
	}
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		got, err := k.ExpiredSubjects(ctx, tx, "signin:", "signin:a", t0.Add(time.Minute), 1)
		if err == nil && !slices.Equal(got, []string{"signin:b"}) {
			t.Errorf("ExpiredSubjects after signin:a, limit 1 = %v, want [signin:b]", got)
		}
		return err
	})
	var all []string
	for range 5 {
		got := forget(t0.Add(24*time.Hour), 2)
		if len(got) > 2 {
			t.Fatalf("ExpiredSubjects(limit 2) = %v", got)
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	if want := []string{"signin:a", "signin:b", "signin:c", "signin:moved"}; !slices.Equal(all, want) {
		t.Errorf("the subjects forgotten a day on: %v, want %v", all, want)
	}
	wantOpen(t, h, k, "user:kept", kept, "user:kept@example.com")
	wantOpen(t, h, k, "signin:mixed", mixed, "signin:mixed@example.com")
	wantOpen(t, h, k, "signin;other", other, "signin;other@example.com")
}

// A secret is 256 bits, the same at each call and after a rotation, other
// for another subject, and none of the subject's wrapped key.
func testSecret(t *testing.T, h Harness) {
	secret := func(k *keyring.Keyring, subject string) []byte {
		var s []byte
		do(t, h, func(ctx context.Context, tx uow.Tx) error {
			var err error
			s, err = k.Secret(ctx, tx, subject)
			return err
		})
		return s
	}
	old := ring(t, h, "a")
	one := secret(old, "$names")
	if len(one) != 32 || !bytes.Equal(one, secret(old, "$names")) || bytes.Equal(one, secret(old, "$other")) {
		t.Fatalf("Secret: %x, then %x, and %x for another subject; want one 32-byte secret per subject", one, secret(old, "$names"), secret(old, "$other"))
	}
	rotated := ring(t, h, "b", "a")
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		_, err := rotated.Rotate(ctx, tx, 10)
		return err
	})
	if got := secret(ring(t, h, "b"), "$names"); !bytes.Equal(got, one) {
		t.Errorf("Secret after a rotation = %x, want %x", got, one)
	}
	// Units of work that make a subject's secret at once agree on it.
	const n = 8
	got := make([][]byte, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error {
				var err error
				got[i], err = old.Secret(ctx, tx, "$new")
				return err
			})
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !bytes.Equal(got[i], got[0]) {
			t.Errorf("concurrent Secret %d = %x, %v; want the one secret %x", i, got[i], errs[i], got[0])
		}
	}
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		w, _, err := h.Store.Key(ctx, tx, "$names", "secret")
		if bytes.Contains(w.Wrapped, one) {
			t.Error("the store holds the secret itself")
		}
		return err
	})
}

// Under Within, a unit of work reads a subject's key once, whether it
// sealed or opened first, and sees its own Forget; without it, each open
// reads the store.
func testWithin(t *testing.T, h Harness) {
	counting := &countingStore{Store: h.Store}
	k, err := keyring.New(masters(t, "a"), counting)
	if err != nil {
		t.Fatal(err)
	}
	sealed := seal(t, h, k, "user:1", "ada@example.com")
	counting.reset()
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		ctx = keyring.Within(ctx, tx)
		again, err := k.Seal(ctx, tx, "user:2", "bob@example.com")
		if err != nil {
			return err
		}
		for range 3 {
			if got, ok, err := k.Open(ctx, tx, "user:2", again); err != nil || !ok || got != "bob@example.com" {
				t.Errorf("Open of a value sealed in this unit of work = %q, %v, %v", got, ok, err)
			}
			if got, ok, err := k.Open(ctx, tx, "user:1", sealed); err != nil || !ok || got != "ada@example.com" {
				t.Errorf("Open = %q, %v, %v", got, ok, err)
			}
		}
		if _, err := k.Forget(ctx, tx, "user:1"); err != nil {
			return err
		}
		if got, ok, err := k.Open(ctx, tx, "user:1", sealed); err != nil || ok {
			t.Errorf("Open after Forget in the same unit of work = %q, %v, %v; want erased", got, ok, err)
		}
		return nil
	})
	if got, want := counting.calls(), 4; got != want {
		t.Errorf("the unit of work made %d calls to the store (an add, a read, a delete, a read); want %d", got, want)
	}
	counting.reset()
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		for range 3 {
			if _, _, err := k.Open(ctx, tx, "user:2", sealed); err != nil {
				return err
			}
		}
		return nil
	})
	if got := counting.calls(); got != 3 {
		t.Errorf("three opens without Within made %d calls to the store, want 3", got)
	}
}

// check runs k.Check in a unit of work of its own.
func check(t *testing.T, h Harness, k *keyring.Keyring) error {
	t.Helper()
	return h.Runner.Do(t.Context(), func(ctx context.Context, tx uow.Tx) error { return k.Check(ctx, tx) })
}

// wantRefused fails t unless err is a [*keyring.MastersError] that names
// needed, and of them missing as missing and other as other keys.
func wantRefused(t *testing.T, what string, err error, needed, missing, other []string) {
	t.Helper()
	var me *keyring.MastersError
	if !errors.As(err, &me) {
		t.Errorf("%s: %v, want a *keyring.MastersError", what, err)
		return
	}
	if !slices.Equal(me.Needed, needed) || !slices.Equal(me.Missing, missing) || !slices.Equal(me.Other, other) {
		t.Errorf("%s: needed %v, missing %v, other %v; want %v, %v, %v", what, me.Needed, me.Missing, me.Other, needed, missing, other)
	}
	for _, id := range needed {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("%s: %q does not name the master key %s", what, err, id)
		}
	}
}

// Check refuses master keys that lack one that wraps stored keys, or hold
// another key under its ID, before anything is sealed or opened: the
// wrong key from the start, and the old key alone after a rotation. The
// right keys pass, and nothing wrapped means nothing is needed.
func testCheck(t *testing.T, h Harness) {
	a := ring(t, h, "a")
	if err := check(t, h, ring(t, h, "b")); err != nil {
		t.Fatalf("Check of an empty store: %v", err)
	}
	if err := check(t, h, a); err != nil {
		t.Fatalf("Check with a key other than the first, before anything was sealed: %v", err)
	}
	sealed := seal(t, h, a, "user:1", "ada@example.com")
	wantRefused(t, "Check without the key that wrapped the store's keys", check(t, h, ring(t, h, "b")), []string{"a"}, []string{"a"}, nil)
	wantRefused(t, "Check with another key under its ID", check(t, h, ring(t, h, "another-a")), []string{"a"}, nil, []string{"a"})
	if err := check(t, h, a); err != nil {
		t.Fatalf("Check with the right key: %v", err)
	}
	both := ring(t, h, "b", "a")
	if err := check(t, h, both); err != nil {
		t.Fatalf("Check with a new key before the old one: %v", err)
	}
	for {
		var n int
		do(t, h, func(ctx context.Context, tx uow.Tx) error {
			var err error
			n, err = both.Rotate(ctx, tx, 10)
			return err
		})
		if n == 0 {
			break
		}
	}
	wantRefused(t, "Check with the old key alone after a rotation", check(t, h, a), []string{"b"}, []string{"b"}, nil)
	onlyNew := ring(t, h, "b")
	if err := check(t, h, onlyNew); err != nil {
		t.Fatalf("Check with the new key alone after a rotation: %v", err)
	}
	wantOpen(t, h, onlyNew, "user:1", sealed, "ada@example.com")
}

// A record without a check, as a store that held keys before it recorded
// master keys has, is checked against a key it wrapped and then given
// its check; one whose key wraps nothing is no obstacle.
func testCheckUnchecked(t *testing.T, h Harness) {
	a := ring(t, h, "a") // never checked: it records nothing
	seal(t, h, a, "user:1", "ada@example.com")
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		return errors.Join(h.Store.PutMaster(ctx, tx, keyring.MasterCheck{Master: "a"}), h.Store.PutMaster(ctx, tx, keyring.MasterCheck{Master: "z"}))
	})
	wantRefused(t, "Check with another key under the ID of a record without a check", check(t, h, ring(t, h, "another-a")), []string{"a"}, nil, []string{"a"})
	if err := check(t, h, a); err != nil {
		t.Fatalf("Check with the key of a record without a check: %v", err)
	}
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		records, err := h.Store.Masters(ctx, tx)
		if err == nil && (len(records) != 2 || records[0].Master != "a" || records[0].Check == nil) {
			t.Errorf("Masters after the check: %+v, want a with its check, and z", records)
		}
		return err
	})
	wantRefused(t, "Check with another key under the ID, once the record has its check", check(t, h, ring(t, h, "another-a")), []string{"a"}, nil, []string{"a"})
}

// countingStore counts the calls made to a store.
type countingStore struct {
	keyring.Store
	n atomic.Int64
}

func (s *countingStore) reset()     { s.n.Store(0) }
func (s *countingStore) calls() int { return int(s.n.Load()) }

func (s *countingStore) Key(ctx context.Context, tx uow.Tx, subject, id string) (keyring.WrappedKey, bool, error) {
	s.n.Add(1)
	return s.Store.Key(ctx, tx, subject, id)
}

func (s *countingStore) AddKey(ctx context.Context, tx uow.Tx, k keyring.WrappedKey, expires time.Time) error {
	s.n.Add(1)
	return s.Store.AddKey(ctx, tx, k, expires)
}

func (s *countingStore) DeleteKeys(ctx context.Context, tx uow.Tx, subject string) (bool, error) {
	s.n.Add(1)
	return s.Store.DeleteKeys(ctx, tx, subject)
}

// New returns a keyring over store with a fixed master key, for the tests
// of what seals and opens personal data.
func New(t testing.TB, store keyring.Store) *keyring.Keyring {
	t.Helper()
	m, err := keyring.ParseMasters(testKeys["a"])
	if err != nil {
		t.Fatal(err)
	}
	k, err := keyring.New(m, store)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// ForgetExpired forgets, a batch at a time, the subjects of a prefix all
// of whose keys' time has come, and no other.
func testForgetExpired(t *testing.T, h Harness) {
	k := ring(t, h, "a")
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sealed := map[string]string{}
	do(t, h, func(ctx context.Context, tx uow.Tx) error {
		for subject, until := range map[string]time.Time{
			"invitation:a": t0, "invitation:b": t0, "invitation:c": t0,
			"invitation:later": t0.Add(time.Hour), "change:a": t0,
		} {
			var err error
			if sealed[subject], err = k.SealUntil(ctx, tx, subject, subject+"@example.com", until); err != nil {
				return err
			}
		}
		return nil
	})
	forget := func() int64 {
		var n int64
		do(t, h, func(ctx context.Context, tx uow.Tx) error {
			var err error
			n, err = k.ForgetExpired(ctx, tx, "invitation:", t0, 2)
			return err
		})
		return n
	}
	if got := []int64{forget(), forget(), forget()}; !slices.Equal(got, []int64{2, 1, 0}) {
		t.Errorf("ForgetExpired(limit 2), three times, forgot %v, want [2 1 0]", got)
	}
	for _, subject := range []string{"invitation:a", "invitation:b", "invitation:c"} {
		if got, ok, err := open(t, h, k, subject, sealed[subject]); err != nil || ok || got != keyring.Erased {
			t.Errorf("Open(%s) after ForgetExpired = %q, %v, %v; want erased", subject, got, ok, err)
		}
	}
	wantOpen(t, h, k, "invitation:later", sealed["invitation:later"], "invitation:later@example.com")
	wantOpen(t, h, k, "change:a", sealed["change:a"], "change:a@example.com")
}
