package keyring

import (
	"context"
	"crypto/cipher"
	"sync"

	"github.com/eventsourced/accounts/internal/uow"
)

// Within returns a context that keeps, for the unit of work tx, the keys
// that [Keyring.Seal] and [Keyring.Open] make or read through it: a unit
// of work seals all its values for one subject under one key, and reads
// each key from the store at most once, so that a command that seals an
// address and then, in its views, opens it again reads nothing. The keys
// kept are those that tx sees, and they go with the context, which must
// not outlive the unit of work; under another unit of work's Tx the
// context keeps nothing.
func Within(ctx context.Context, tx uow.Tx) context.Context {
	return context.WithValue(ctx, cacheKey{}, &cache{tx: tx, keys: map[cacheEntry]cipher.AEAD{}, sealingIDs: map[string]string{}})
}

type cacheKey struct{}

// cache holds the ciphers of the unwrapped keys of one unit of work.
type cache struct {
	tx   uow.Tx
	mu   sync.Mutex
	keys map[cacheEntry]cipher.AEAD
	// sealingIDs are the IDs of the keys this unit of work made, by
	// subject.
	sealingIDs map[string]string
}

type cacheEntry struct{ subject, id string }

// cacheOf returns the cache of tx that ctx carries, or nil: a nil cache
// keeps nothing.
func cacheOf(ctx context.Context, tx uow.Tx) *cache {
	c, _ := ctx.Value(cacheKey{}).(*cache)
	if c == nil || c.tx != tx {
		return nil
	}
	return c
}

func (c *cache) get(subject, id string) (cipher.AEAD, bool) {
	if c == nil {
		return nil, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	aead, ok := c.keys[cacheEntry{subject, id}]
	return aead, ok
}

func (c *cache) put(subject, id string, aead cipher.AEAD) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys[cacheEntry{subject, id}] = aead
}

// sealing returns the key this unit of work made for subject.
func (c *cache) sealing(subject string) (cipher.AEAD, string, bool) {
	if c == nil {
		return nil, "", false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	id, ok := c.sealingIDs[subject]
	if !ok {
		return nil, "", false
	}
	return c.keys[cacheEntry{subject, id}], id, true
}

func (c *cache) putSealing(subject, id string, aead cipher.AEAD) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.keys[cacheEntry{subject, id}] = aead
	c.sealingIDs[subject] = id
}

// drop forgets every key of subject.
func (c *cache) drop(subject string) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := range c.keys {
		if e.subject == subject {
			delete(c.keys, e)
		}
	}
	delete(c.sealingIDs, subject)
}
