package eventstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
)

// ErrUnregistered is returned for an event whose type, or a value whose Go
// type, no [Registry] names.
var ErrUnregistered = errors.New("eventstore: unregistered event type")

// ErrUnknownSchemaVersion is returned for an event stored at a schema
// version its type does not have yet: one written by a newer release.
var ErrUnknownSchemaVersion = errors.New("eventstore: unknown schema version")

// An Upcaster turns the data of an event at one schema version of its type
// into the data of the next version. It is given the whole event, whose
// Data is at the older version, so that it can fill a new field from the
// event's envelope (its time, its stream); it must not fail on any data
// that version ever held.
type Upcaster func(e Event) ([]byte, error)

// Registry names each event type of a domain once: its name in the log,
// the Go type its data decodes into, its current schema version, and the
// upcasters that bring every older version to the current one. Readers
// decode events through it ([Decode], [Registry.Decode]), so that they
// see only current versions, whichever version the log holds; writers
// make events through it ([Registry.New]), so that each is stored with
// its type's current version.
//
// A type's category is its name up to the first dot: "user" for
// "user.registered". It names the streams the type's events are appended
// to, and the folds and projections that follow those streams handle
// every type of the category ([Registry.Category]).
//
// A Registry is built once, before use, by [Register]; it is then only
// read, and safe for concurrent use.
type Registry struct {
	byName map[string]*registered
	byGo   map[reflect.Type]*registered
}

type registered struct {
	name      string
	goType    reflect.Type
	upcasters []Upcaster
}

// version is the type's current schema version.
func (r *registered) version() int { return len(r.upcasters) + 1 }

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{byName: map[string]*registered{}, byGo: map[reflect.Type]*registered{}}
}

// Register names the events of type typ, whose data is a T, in r. Their
// current schema version is one more than the number of upcasters: the
// first upcaster turns version 1 into version 2, the next 2 into 3, and
// so on. An event once stored is a contract forever, so a new shape of a
// type is a new version with an upcaster, never an edit of T's fields
// under the same version.
//
// It panics when typ has no category (no dot), or when typ or T is
// registered already: a registry is built at start-up, and a mistake in
// it is a bug.
func Register[T any](r *Registry, typ string, upcasters ...Upcaster) {
	goType := reflect.TypeFor[T]()
	if cat, _, ok := strings.Cut(typ, "."); !ok || cat == "" {
		panic(fmt.Sprintf("eventstore: register %s: a type's name is its category, a dot and more", typ))
	}
	if _, dup := r.byName[typ]; dup {
		panic(fmt.Sprintf("eventstore: register %s: registered twice", typ))
	}
	if other, dup := r.byGo[goType]; dup {
		panic(fmt.Sprintf("eventstore: register %s: %s is registered already, as %s", typ, goType, other.name))
	}
	if len(upcasters)+1 > MaxSchemaVersion {
		panic(fmt.Sprintf("eventstore: register %s: more versions than a store keeps", typ))
	}
	reg := &registered{name: typ, goType: goType, upcasters: upcasters}
	r.byName[typ], r.byGo[goType] = reg, reg
}

// TypeOf returns the name T's events are registered under, and false when
// T is not registered.
func TypeOf[T any](r *Registry) (string, bool) {
	reg, ok := r.byGo[reflect.TypeFor[T]()]
	if !ok {
		return "", false
	}
	return reg.name, true
}

// GoType returns the Go type of typ's data, and false when typ is not
// registered.
func (r *Registry) GoType(typ string) (reflect.Type, bool) {
	reg, ok := r.byName[typ]
	if !ok {
		return nil, false
	}
	return reg.goType, true
}

// Version returns typ's current schema version, and 0 when typ is not
// registered.
func (r *Registry) Version(typ string) int {
	reg, ok := r.byName[typ]
	if !ok {
		return 0
	}
	return reg.version()
}

// Types returns every registered type, sorted.
func (r *Registry) Types() []string {
	types := make([]string, 0, len(r.byName))
	for name := range r.byName {
		types = append(types, name)
	}
	slices.Sort(types)
	return types
}

// Category returns the registered types of category, such as "user",
// sorted.
func (r *Registry) Category(category string) []string {
	var types []string
	for _, typ := range r.Types() {
		if CategoryOf(typ) == category {
			types = append(types, typ)
		}
	}
	return types
}

// CategoryOf returns the category of the type typ: its name up to the
// first dot.
func CategoryOf(typ string) string {
	cat, _, _ := strings.Cut(typ, ".")
	return cat
}

// New returns a new event of data, whose Go type names its type, at the
// type's current schema version, with md ([NewEvent]).
func (r *Registry) New(data any, md Metadata) (Event, error) {
	reg, ok := r.byGo[reflect.TypeOf(data)]
	if !ok {
		return Event{}, fmt.Errorf("%w: %T", ErrUnregistered, data)
	}
	e, err := NewEvent(reg.name, data, md)
	if err != nil {
		return Event{}, err
	}
	e.SchemaVersion = reg.version()
	return e, nil
}

// Upcast returns e with its data at its type's current schema version,
// run through the upcasters of each version after the one it is stored
// at. An event at the current version is returned as it is.
func (r *Registry) Upcast(e Event) (Event, error) {
	reg, ok := r.byName[e.Type]
	if !ok {
		return Event{}, fmt.Errorf("%w: %s (event %s)", ErrUnregistered, e.Type, e.ID)
	}
	from := StoredSchemaVersion(e)
	if from > reg.version() {
		return Event{}, fmt.Errorf("%w: %s %s is at version %d, this release knows up to %d",
			ErrUnknownSchemaVersion, e.Type, e.ID, from, reg.version())
	}
	for v := from; v < reg.version(); v++ {
		data, err := reg.upcasters[v-1](e)
		if err != nil {
			return Event{}, fmt.Errorf("eventstore: upcast %s %s from version %d: %w", e.Type, e.ID, v, err)
		}
		e.Data, e.SchemaVersion = data, v+1
	}
	e.SchemaVersion = reg.version()
	return e, nil
}

// Decode returns the data of e, upcast to its type's current version, as
// a value of the type's registered Go type.
func (r *Registry) Decode(e Event) (any, error) {
	e, err := r.Upcast(e)
	if err != nil {
		return nil, err
	}
	v := reflect.New(r.byName[e.Type].goType)
	if err := json.Unmarshal(e.Data, v.Interface()); err != nil {
		return nil, fmt.Errorf("eventstore: decode %s %s: %w", e.Type, e.ID, err)
	}
	return v.Elem().Interface(), nil
}

// Decode returns the data of e, upcast to its type's current version, as
// a T, which must be the Go type registered for e's type.
func Decode[T any](r *Registry, e Event) (T, error) {
	var zero T
	d, err := r.Decode(e)
	if err != nil {
		return zero, err
	}
	v, ok := d.(T)
	if !ok {
		return zero, fmt.Errorf("eventstore: decode %s %s: its data is a %T, not a %T", e.Type, e.ID, d, zero)
	}
	return v, nil
}

// CheckHandles returns an error when handled, the types a fold or a
// projection handles, leaves out a registered type of one of categories,
// or names a type that is not registered. A test of each fold and
// projection calls it, so that a type added to a category and forgotten
// by one of them fails there, not at run time.
func (r *Registry) CheckHandles(handled []string, categories ...string) error {
	var errs []error
	for _, typ := range handled {
		if _, ok := r.byName[typ]; !ok {
			errs = append(errs, fmt.Errorf("%s is handled but not registered", typ))
		}
	}
	for _, cat := range categories {
		for _, typ := range r.Category(cat) {
			if !slices.Contains(handled, typ) {
				errs = append(errs, fmt.Errorf("%s is registered but not handled", typ))
			}
		}
	}
	return errors.Join(errs...)
}
