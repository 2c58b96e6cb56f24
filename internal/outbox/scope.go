package outbox

import (
	"context"
	"time"
)

// Scope narrows what one [Store.Claim] takes; the zero value narrows
// nothing. The relay uses it to claim only the topics it has a handler
// for, and of those not the topics whose destination is down, so that
// their attempts are not spent, to claim one of them as a probe, and to
// start a claim's scan where the previous claim
// found the earliest due message, instead of at the head of the due index,
// which a long transaction elsewhere can fill with versions of messages
// already delivered.
type Scope struct {
	// Only, when not empty, is the set of topics to claim from.
	Only []string
	// Except lists topics not to claim from.
	Except []string
	// From, when not zero, leaves out messages due before it.
	From time.Time
}

// Empty reports whether s narrows nothing.
func (s Scope) Empty() bool { return len(s.Only) == 0 && len(s.Except) == 0 && s.From.IsZero() }

type scopeKey struct{}

// WithScope returns a context under which [Store.Claim] claims only
// messages that s admits.
func WithScope(ctx context.Context, s Scope) context.Context {
	if s.Empty() {
		return ctx
	}
	return context.WithValue(ctx, scopeKey{}, s)
}

// ScopeFrom returns the scope of a claim under ctx. Stores call it in
// Claim.
func ScopeFrom(ctx context.Context) Scope {
	s, _ := ctx.Value(scopeKey{}).(Scope)
	return s
}
