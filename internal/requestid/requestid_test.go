package requestid_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/requestid"
)

func TestValid(t *testing.T) {
	for _, id := range []string{"a", "0f8fad5b-d9cb-469f-a165-70867728950e", "01HV6Y:web.1/a+b=", strings.Repeat("x", requestid.MaxLen)} {
		if !requestid.Valid(id) {
			t.Errorf("Valid(%q) = false, want true", id)
		}
	}
	for _, id := range []string{"", strings.Repeat("x", requestid.MaxLen+1), "has space", "ann@example.com", "tab\t", "line\nbreak", "é", `quote"`} {
		if requestid.Valid(id) {
			t.Errorf("Valid(%q) = true, want false", id)
		}
	}
}

func TestNewIsValidAndFresh(t *testing.T) {
	a, b := requestid.New(), requestid.New()
	if !requestid.Valid(a) || len(a) != 32 {
		t.Fatalf("New() = %q, want 32 valid characters", a)
	}
	if a == b {
		t.Fatalf("New() returned %q twice", a)
	}
}

func TestContextCarriesID(t *testing.T) {
	ctx := context.Background()
	if got := requestid.From(ctx); got != "" {
		t.Fatalf("From(empty) = %q, want \"\"", got)
	}
	if got := requestid.From(requestid.With(ctx, "r-1")); got != "r-1" {
		t.Fatalf("From(With(r-1)) = %q", got)
	}
}
