package aggregate_test

import (
	"errors"
	"testing"

	"github.com/eventsourced/accounts/internal/aggregate"
	"github.com/eventsourced/accounts/internal/eventstore"
)

type added struct {
	N int `json:"n"`
}

type removed struct {
	N int `json:"n"`
}

type unregistered struct{}

func TestFold(t *testing.T) {
	r := eventstore.NewRegistry()
	eventstore.Register[added](r, "counter.added")
	eventstore.Register[removed](r, "counter.removed")
	f := aggregate.NewFold[int](r)
	aggregate.On(f, func(s int, _ eventstore.Event, d added) int { return s + d.N })
	event := func(data any) eventstore.Event {
		e, err := r.New(data, eventstore.Metadata{})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}

	got, err := f.Run(0, event(added{2}), event(added{3}))
	if err != nil || got != 5 {
		t.Errorf("Run = %d, %v; want 5", got, err)
	}
	if _, err := f.Run(0, event(added{2}), event(removed{1})); !errors.Is(err, aggregate.ErrUnhandled) {
		t.Errorf("a type the fold does not handle: %v, want ErrUnhandled", err)
	}
	if err := r.CheckHandles(f.Handles(), "counter"); err == nil {
		t.Error("CheckHandles passed a fold that leaves counter.removed out")
	}
	for name, on := range map[string]func(){
		"an unregistered type": func() { aggregate.On(f, func(s int, _ eventstore.Event, _ unregistered) int { return s }) },
		"a type twice":         func() { aggregate.On(f, func(s int, _ eventstore.Event, _ added) int { return s }) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("On of %s did not panic", name)
				}
			}()
			on()
		}()
	}
}
