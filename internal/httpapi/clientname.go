package httpapi

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"net/http"
	"net/netip"
	"sync"
	"time"
)

// clientNames names the client of each request in the request log without
// its address: the name is an HMAC-SHA256 of the client's address (as the
// rate limit counts it: the IP, an IPv6 client's /64, the rightmost
// untrusted hop of X-Forwarded-For behind trusted proxies), cut to 64 bits,
// under a key of 256 random bits that lives in this process's memory only
// and is replaced by a new one when the UTC day changes.
//
// So one source's requests share a name for the rest of the day and can be
// followed through the log, while the log holds no address: nobody,
// the operator included, can tell from a name which address it stands for,
// or match the names of two days, two instances or two runs of the
// process, whose keys differ. Once a day's key is gone, its names are
// tied to no one.
type clientNames struct {
	now     func() time.Time
	trusted []netip.Prefix

	mu sync.Mutex
	// day is the UTC date whose key mac holds; mac is nil until the first
	// name.
	day time.Time
	mac hash.Hash
	sum []byte
}

// newClientNames returns the names of clients, whose key changes at each
// UTC midnight by now; trusted are the proxies whose X-Forwarded-For names
// the client.
func newClientNames(now func() time.Time, trusted []netip.Prefix) *clientNames {
	return &clientNames{now: now, trusted: trusted}
}

// name returns the name of r's client: 16 hex digits.
func (c *clientNames) name(r *http.Request) string {
	addr := clientAddress(r, c.trusted)
	y, m, d := c.now().UTC().Date()
	day := time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mac == nil || !day.Equal(c.day) {
		key := make([]byte, 32)
		_, _ = rand.Read(key) // crypto/rand.Read never fails; it crashes the program first.
		c.mac, c.day = hmac.New(sha256.New, key), day
	}
	c.mac.Reset()
	_, _ = c.mac.Write([]byte(addr))
	c.sum = c.mac.Sum(c.sum[:0])
	return hex.EncodeToString(c.sum[:8])
}
