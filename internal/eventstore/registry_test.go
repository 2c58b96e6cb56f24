package eventstore_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/eventstore"
)

type placedV1 struct {
	Item string `json:"item"`
}

type placed struct {
	Items []string `json:"items"`
	Note  string   `json:"note"`
}

type cancelled struct{}

// registry registers order.placed at version 3: version 1 held one item,
// version 2 a list, version 3 a note.
func registry(t *testing.T) *eventstore.Registry {
	t.Helper()
	r := eventstore.NewRegistry()
	eventstore.Register[placed](r, "order.placed",
		func(e eventstore.Event) ([]byte, error) {
			var v1 placedV1
			if err := json.Unmarshal(e.Data, &v1); err != nil {
				return nil, err
			}
			return json.Marshal(map[string]any{"items": []string{v1.Item}})
		},
		func(e eventstore.Event) ([]byte, error) {
			var v2 map[string]any
			if err := json.Unmarshal(e.Data, &v2); err != nil {
				return nil, err
			}
			v2["note"] = "from " + e.Stream
			return json.Marshal(v2)
		})
	eventstore.Register[cancelled](r, "order.cancelled")
	return r
}

func TestRegistry(t *testing.T) {
	t.Run("UpcastsEveryOlderVersion", func(t *testing.T) {
		r := registry(t)
		for v, data := range map[int]string{1: `{"item":"tea"}`, 2: `{"items":["tea"]}`, 3: `{"items":["tea"],"note":"from order-1"}`} {
			e := eventstore.Event{Type: "order.placed", Stream: "order-1", Data: []byte(data), SchemaVersion: v}
			got, err := eventstore.Decode[placed](r, e)
			if err != nil {
				t.Fatalf("version %d: %v", v, err)
			}
			if len(got.Items) != 1 || got.Items[0] != "tea" || got.Note != "from order-1" {
				t.Errorf("version %d decoded as %+v", v, got)
			}
		}
		up, err := r.Upcast(eventstore.Event{Type: "order.placed", Data: []byte(`{"item":"tea"}`)})
		if err != nil || up.SchemaVersion != 3 {
			t.Errorf("an event stored without a version upcast to %d, %v; want version 3, read as version 1", up.SchemaVersion, err)
		}
	})
	t.Run("NewIsAtTheCurrentVersion", func(t *testing.T) {
		r := registry(t)
		e, err := r.New(placed{Items: []string{"tea"}}, eventstore.Metadata{})
		if err != nil || e.Type != "order.placed" || e.SchemaVersion != 3 {
			t.Errorf("New: %s at version %d, %v", e.Type, e.SchemaVersion, err)
		}
		if _, err := r.New(placedV1{}, eventstore.Metadata{}); !errors.Is(err, eventstore.ErrUnregistered) {
			t.Errorf("New of an unregistered Go type: %v, want ErrUnregistered", err)
		}
	})
	t.Run("RefusesWhatItCannotRead", func(t *testing.T) {
		r := registry(t)
		if _, err := r.Decode(eventstore.Event{Type: "order.shipped", Data: []byte(`{}`)}); !errors.Is(err, eventstore.ErrUnregistered) {
			t.Errorf("an unregistered type: %v, want ErrUnregistered", err)
		}
		if _, err := r.Decode(eventstore.Event{Type: "order.placed", Data: []byte(`{}`), SchemaVersion: 4}); !errors.Is(err, eventstore.ErrUnknownSchemaVersion) {
			t.Errorf("a version from a newer release: %v, want ErrUnknownSchemaVersion", err)
		}
		if _, err := eventstore.Decode[cancelled](r, eventstore.Event{Type: "order.placed", Data: []byte(`{"items":[],"note":""}`), SchemaVersion: 3}); err == nil {
			t.Error("decoding an order.placed as a cancelled succeeded")
		}
	})
	t.Run("CheckHandles", func(t *testing.T) {
		r := registry(t)
		if err := r.CheckHandles([]string{"order.cancelled", "order.placed"}, "order"); err != nil {
			t.Errorf("every type handled: %v", err)
		}
		err := r.CheckHandles([]string{"order.placed", "order.shipped"}, "order")
		if err == nil || !strings.Contains(err.Error(), "order.cancelled is registered but not handled") ||
			!strings.Contains(err.Error(), "order.shipped is handled but not registered") {
			t.Errorf("a type left out and one unregistered: %v", err)
		}
	})
	t.Run("RegisterRefusesMistakes", func(t *testing.T) {
		for name, register := range map[string]func(r *eventstore.Registry){
			"a type twice":            func(r *eventstore.Registry) { eventstore.Register[placedV1](r, "order.placed") },
			"a Go type twice":         func(r *eventstore.Registry) { eventstore.Register[placed](r, "order.replaced") },
			"a type with no category": func(r *eventstore.Registry) { eventstore.Register[placedV1](r, "placed") },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("registering %s did not panic", name)
					}
				}()
				register(registry(t))
			}()
		}
	})
}
