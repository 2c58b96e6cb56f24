package wakeup_test

import (
	"context"
	"testing"

	"github.com/eventsourced/accounts/internal/wakeup"
)

func TestFanout(t *testing.T) {
	t.Parallel()
	f := wakeup.New()
	ctxA, stopA := context.WithCancel(t.Context())
	a := f.Subscribe(ctxA)
	b := f.Subscribe(t.Context())

	// Wake-ups coalesce: two find one waiting.
	f.Wake()
	f.Wake()
	for name, s := range map[string]wakeup.Subscription{"a": a, "b": b} {
		if !woken(s) {
			t.Errorf("%s: no wake-up after Fanout.Wake", name)
		}
		if woken(s) {
			t.Errorf("%s: a second wake-up, want two coalesced into one", name)
		}
	}

	// A subscription's own Wake reaches it alone.
	b.Wake()
	if woken(a) || !woken(b) {
		t.Error("Subscription.Wake of b: want b woken, a not")
	}

	// Once its context is done the channel is closed, and waking it is
	// harmless.
	stopA()
	if _, ok := <-a.C(); ok {
		t.Error("a's channel still open after its context ended")
	}
	a.Wake()
	f.Wake()
	if !woken(b) {
		t.Error("b: no wake-up after a's context ended")
	}
}

// woken takes a waiting wake-up of s, if any, without waiting.
func woken(s wakeup.Subscription) bool {
	select {
	case _, ok := <-s.C():
		return ok
	default:
		return false
	}
}
