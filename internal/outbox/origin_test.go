package outbox_test

import (
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/outbox"
)

func TestDecodeOrigin(t *testing.T) {
	t.Parallel()
	t.Run("reads what EncodeOrigin wrote", func(t *testing.T) {
		t.Parallel()
		want := outbox.Origin{TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", RequestID: "req-1"}
		b, err := outbox.EncodeOrigin(want)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := outbox.DecodeOrigin(b); err != nil || got != want {
			t.Errorf("DecodeOrigin(%s) = %+v, %v; want %+v", b, got, err, want)
		}
		if got, err := outbox.DecodeOrigin(nil); err != nil || got != (outbox.Origin{}) {
			t.Errorf("DecodeOrigin(NULL) = %+v, %v; want the zero origin", got, err)
		}
	})
	// A store wraps the error with its own "outbox: claim ID:", so the
	// error does not name the package a second time.
	t.Run("an error for a store to wrap", func(t *testing.T) {
		t.Parallel()
		_, err := outbox.DecodeOrigin([]byte(`["not", "an", "origin"]`))
		if err == nil || !strings.HasPrefix(err.Error(), "decode origin: ") {
			t.Errorf("DecodeOrigin of an array: %v, want an error that begins with \"decode origin: \"", err)
		}
	})
}
