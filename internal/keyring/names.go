package keyring

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"

	"github.com/eventsourced/accounts/internal/uow"
)

// Name returns the name of s under secret: the first 128 bits of the
// HMAC-SHA256 of s, in hex. A name shows nothing of what it names to
// whoever lacks the secret.
func Name(secret []byte, s string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(s))
	return hex.EncodeToString(mac.Sum(nil)[:16])
}

// Names holds the secret of one subject ([Keyring.Secret]) that names
// things ([Name]). It reads the secret, or makes it the first time ever,
// in a unit of work of its own the first time it is asked for, and keeps
// it once that unit of work has committed: a subject's secret never
// changes. It is safe for concurrent use.
type Names struct {
	keys    *Keyring
	runner  uow.Runner
	subject string

	mu     sync.Mutex
	secret []byte
}

// NewNames returns the names of subject's secret, read from keys in units
// of work of runner.
func NewNames(keys *Keyring, runner uow.Runner, subject string) *Names {
	return &Names{keys: keys, runner: runner, subject: subject}
}

// Secret returns the secret, reading it the first time.
func (n *Names) Secret(ctx context.Context) ([]byte, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.secret != nil {
		return n.secret, nil
	}
	var secret []byte
	err := n.runner.Do(ctx, func(ctx context.Context, tx uow.Tx) error {
		var err error
		secret, err = n.keys.Secret(ctx, tx, n.subject)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("keyring: the secret of names %s: %w", n.subject, err)
	}
	n.secret = secret
	return secret, nil
}
