package keyring

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"

	"github.com/eventsourced/accounts/internal/uow"
)

// MasterCheck is a store's record of a master key that wraps keys in it:
// the key's ID, and a check value, an empty text sealed by that key, by
// which another key under the same ID is told apart. A record without a
// check (nil) was made from the keys the store held before it recorded
// master keys; [Keyring.Check] fills it in.
type MasterCheck struct {
	Master string
	Check  []byte
}

// MastersError is the error of [Keyring.Check] when the keyring lacks a
// master key that wraps keys in the store, or has another key under its ID.
type MastersError struct {
	// Needed are the IDs of the master keys that wrap the store's keys, in
	// order.
	Needed []string
	// Missing are those of Needed that the keyring lacks.
	Missing []string
	// Other are those of Needed that the keyring has another key under.
	Other []string
}

func (e *MastersError) Error() string {
	var what []string
	if len(e.Missing) > 0 {
		what = append(what, "missing: "+strings.Join(e.Missing, ", "))
	}
	if len(e.Other) > 0 {
		what = append(what, "another key under the ID: "+strings.Join(e.Other, ", "))
	}
	return fmt.Sprintf("the stored data keys need the master keys %s (%s)", strings.Join(e.Needed, ", "), strings.Join(what, "; "))
}

// Check makes sure, as part of tx, that the keyring's master keys unwrap
// the store's keys, before it seals or opens anything: that it has every
// master key that the store records and that still wraps a key, under the
// same ID and as the same key. Otherwise it returns a [*MastersError]
// that names them. Then it records the current master key, which wraps
// the keys made from now on; a record is dropped only by the rotation
// that leaves its key nothing to unwrap ([Keyring.Rotate]).
//
// A keyring that never checks records nothing, so every process that
// seals checks first. Of two processes that start at once on a store
// with different master keys, both may pass; each has recorded its key,
// so the next start of either, once the other has sealed, fails.
func (k *Keyring) Check(ctx context.Context, tx uow.Tx) error {
	records, err := k.store.Masters(ctx, tx)
	if err != nil {
		return fmt.Errorf("keyring: check master keys: %w", err)
	}
	var bad MastersError
	var checked []string
	current := k.masters.current()
	recorded := false
	for _, r := range records {
		m, have := k.masters.byID(r.Master)
		if have && r.Check != nil && m.verify(r.Check) {
			// Needed if it wraps a key, which only an error says.
			checked = append(checked, r.Master)
			recorded = recorded || r.Master == current.id
			continue
		}
		// A master key the keyring lacks or has another key under, or one
		// recorded without a check: does a key still need it, and does
		// the keyring unwrap that key?
		w, ok, err := k.store.KeyWrappedBy(ctx, tx, r.Master)
		if err != nil {
			return fmt.Errorf("keyring: check master key %s: %w", r.Master, err)
		}
		if !ok {
			continue
		}
		bad.Needed = append(bad.Needed, r.Master)
		switch _, err := k.masters.unwrap(w); {
		case !have:
			bad.Missing = append(bad.Missing, r.Master)
		case err != nil:
			bad.Other = append(bad.Other, r.Master)
		default:
			if err := k.store.PutMaster(ctx, tx, m.record()); err != nil {
				return fmt.Errorf("keyring: record master key %s: %w", r.Master, err)
			}
			recorded = recorded || r.Master == current.id
		}
	}
	if len(bad.Missing)+len(bad.Other) > 0 {
		for _, id := range checked {
			if _, ok, err := k.store.KeyWrappedBy(ctx, tx, id); err != nil {
				return fmt.Errorf("keyring: check master key %s: %w", id, err)
			} else if ok {
				bad.Needed = append(bad.Needed, id)
			}
		}
		slices.Sort(bad.Needed)
		return &bad
	}
	if !recorded {
		if err := k.store.PutMaster(ctx, tx, current.record()); err != nil {
			return fmt.Errorf("keyring: record master key %s: %w", current.id, err)
		}
	}
	return nil
}

// forgetOthers drops, as part of tx, the records of the master keys other
// than the current one, once a rotation has left them no key to unwrap.
func (k *Keyring) forgetOthers(ctx context.Context, tx uow.Tx) error {
	records, err := k.store.Masters(ctx, tx)
	if err != nil {
		return err
	}
	current := k.masters.current().id
	for _, r := range records {
		if r.Master == current {
			continue
		}
		if err := k.store.DeleteMaster(ctx, tx, r.Master); err != nil {
			return err
		}
	}
	return nil
}

// byID returns the master key id.
func (m Masters) byID(id string) (master, bool) {
	i := slices.IndexFunc(m.keys, func(k master) bool { return k.id == id })
	if i < 0 {
		return master{}, false
	}
	return m.keys[i], true
}

// record returns the record of k, with a fresh check value.
func (k master) record() MasterCheck {
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+k.aead.Overhead())
	_, _ = rand.Read(nonce)
	return MasterCheck{Master: k.id, Check: k.aead.Seal(nonce, nonce, nil, checkAD(k.id))}
}

// verify reports whether check is a check value that k made.
func (k master) verify(check []byte) bool {
	if len(check) < k.aead.NonceSize() {
		return false
	}
	_, err := k.aead.Open(nil, check[:k.aead.NonceSize()], check[k.aead.NonceSize():], checkAD(k.id))
	return err == nil
}

// checkAD is the associated data of a check value, which no wrapped key
// shares ([wrapAD]).
func checkAD(id string) []byte { return []byte("master key check " + id) }
