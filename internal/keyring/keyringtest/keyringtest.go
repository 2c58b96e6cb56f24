// Package keyringtest is the conformance suite of [keyring.Store]: every
// backend runs it, through a [keyring.Keyring], against its real database.
package keyringtest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

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
		{"AddKey/ConcurrentSealsShareOneKey", testConcurrentSeals},
		{"Rotate/RewrapsEveryKey", testRotate},
		{"ReadOnly/SealOfANewSubjectRefused", testReadOnly},
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
	if one == two || strings.Contains(one, "ada") || !keyring.Sealed(one) {
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

// Units of work that seal for a new subject at once end with one key, and
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

// A read-only unit of work cannot make a key.
func testReadOnly(t *testing.T, h Harness) {
	k := ring(t, h, "a")
	err := h.Runner.Read(t.Context(), func(ctx context.Context, tx uow.Tx) error {
		_, err := k.Seal(ctx, tx, "user:1", "ada@example.com")
		return err
	})
	if !errors.Is(err, uow.ErrReadOnly) {
		t.Errorf("Seal of a new subject in a read-only unit of work: %v, want uow.ErrReadOnly", err)
	}
}
