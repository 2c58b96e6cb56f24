package projections

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/uow"
)

// ErrUnhandled is returned by [Handlers.Apply] for an event of a type the
// projection neither handles nor skips.
var ErrUnhandled = errors.New("projections: unhandled event type")

// Handlers are how a projection applies events to its read model, an M
// (its tables, or a batch of rows to write): for each event type of the
// categories it follows, the function that applies an event of that type,
// or the plain statement that the type changes nothing in it ([Skip]).
// Events are decoded through a registry, upcast to their types' current
// versions. There is no default: an event of a type neither handled nor
// skipped fails [Handlers.Apply], and a test of each projection checks
// that it covers every registered type of its categories
// ([eventstore.Registry.CheckHandles] of [Handlers.Covers]).
type Handlers[M any] struct {
	events  *eventstore.Registry
	on      map[string]func(context.Context, uow.Tx, M, eventstore.Event, any) error
	skipped []string
}

// NewHandlers returns handlers of events registered in events, which
// handle no type until [Handle] or [Skip] adds one.
func NewHandlers[M any](events *eventstore.Registry) *Handlers[M] {
	return &Handlers[M]{events: events, on: map[string]func(context.Context, uow.Tx, M, eventstore.Event, any) error{}}
}

// Handle makes h apply each event whose data is an E with apply. It
// panics when E is not registered, or is handled or skipped already.
func Handle[E, M any](h *Handlers[M], apply func(ctx context.Context, tx uow.Tx, m M, e eventstore.Event, d E) error) {
	typ := h.add(reflect.TypeFor[E](), mustTypeOf[E](h.events))
	h.on[typ] = func(ctx context.Context, tx uow.Tx, m M, e eventstore.Event, d any) error {
		return apply(ctx, tx, m, e, d.(E))
	}
}

// Skip says that events whose data is an E change nothing in the
// projection: it does not read them ([Handlers.Types]). It panics as
// [Handle] does.
func Skip[E, M any](h *Handlers[M]) {
	h.skipped = append(h.skipped, h.add(reflect.TypeFor[E](), mustTypeOf[E](h.events)))
}

func mustTypeOf[E any](events *eventstore.Registry) string {
	typ, ok := eventstore.TypeOf[E](events)
	if !ok {
		panic(fmt.Sprintf("projections: handle %s: %s", reflect.TypeFor[E](), eventstore.ErrUnregistered))
	}
	return typ
}

func (h *Handlers[M]) add(goType reflect.Type, typ string) string {
	if _, dup := h.on[typ]; dup || slices.Contains(h.skipped, typ) {
		panic(fmt.Sprintf("projections: handle %s (%s): handled twice", typ, goType))
	}
	return typ
}

// Apply applies e to m in tx. An event of a skipped type changes nothing;
// one of a type neither handled nor skipped is [ErrUnhandled].
func (h *Handlers[M]) Apply(ctx context.Context, tx uow.Tx, m M, e eventstore.Event) error {
	apply, ok := h.on[e.Type]
	if !ok {
		if slices.Contains(h.skipped, e.Type) {
			return nil
		}
		return fmt.Errorf("%w: %s", ErrUnhandled, e.Type)
	}
	d, err := h.events.Decode(e)
	if err != nil {
		return err
	}
	return apply(ctx, tx, m, e, d)
}

// Types returns the types h applies, sorted: those a projection reads.
func (h *Handlers[M]) Types() []string {
	types := make([]string, 0, len(h.on))
	for typ := range h.on {
		types = append(types, typ)
	}
	slices.Sort(types)
	return types
}

// Covers returns the types h handles or skips, sorted.
func (h *Handlers[M]) Covers() []string {
	types := append(h.Types(), h.skipped...)
	slices.Sort(types)
	return types
}
