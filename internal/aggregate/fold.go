package aggregate

import (
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/eventsourced/accounts/internal/eventstore"
)

// ErrUnhandled is returned by a [Fold] for an event of a type it has no
// evolve for.
var ErrUnhandled = errors.New("aggregate: unhandled event type")

// Fold is the evolve of an aggregate whose state is an S: for each event
// type of the aggregate, the function that folds an event of that type
// into the state and returns the new state. It decodes each event through
// its registry, upcast to the type's current version.
type Fold[S any] struct {
	events *eventstore.Registry
	on     map[string]func(S, eventstore.Event, any) S
}

// NewFold returns a fold of events registered in events, which handles no
// type until [On] adds one.
func NewFold[S any](events *eventstore.Registry) *Fold[S] {
	return &Fold[S]{events: events, on: map[string]func(S, eventstore.Event, any) S{}}
}

// On makes f fold each event whose data is an E with evolve, which is
// given the state, the event (for its envelope: time, version, ID) and
// its data, and returns the new state. It panics when E is not
// registered, or when f handles E already: a fold is built at start-up,
// and a mistake in it is a bug.
func On[E, S any](f *Fold[S], evolve func(s S, e eventstore.Event, d E) S) {
	typ, ok := eventstore.TypeOf[E](f.events)
	if !ok {
		panic(fmt.Sprintf("aggregate: fold of %s: %s", reflect.TypeFor[E](), eventstore.ErrUnregistered))
	}
	if _, dup := f.on[typ]; dup {
		panic(fmt.Sprintf("aggregate: fold of %s: handled twice", typ))
	}
	f.on[typ] = func(s S, e eventstore.Event, d any) S { return evolve(s, e, d.(E)) }
}

// Evolve returns s with e folded in. An event of a type f does not handle
// is [ErrUnhandled].
func (f *Fold[S]) Evolve(s S, e eventstore.Event) (S, error) {
	evolve, ok := f.on[e.Type]
	if !ok {
		return s, fmt.Errorf("%w: %s (event %s)", ErrUnhandled, e.Type, e.ID)
	}
	d, err := f.events.Decode(e)
	if err != nil {
		return s, err
	}
	return evolve(s, e, d), nil
}

// Run returns s with events folded in, in order.
func (f *Fold[S]) Run(s S, events ...eventstore.Event) (S, error) {
	for _, e := range events {
		var err error
		if s, err = f.Evolve(s, e); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Handles returns the types f folds, sorted.
func (f *Fold[S]) Handles() []string {
	types := make([]string, 0, len(f.on))
	for typ := range f.on {
		types = append(types, typ)
	}
	slices.Sort(types)
	return types
}
