package user

import (
	"github.com/eventsourced/accounts/internal/eventstore"

	"testing"
)

// TestFoldsAndProjectionsHandleEveryType fails when a fold or a projection
// leaves out a registered type of a category it follows, or handles one
// that nobody registered: a type added to the domain must be decided on
// by each of them, since none has a default.
func TestFoldsAndProjectionsHandleEveryType(t *testing.T) {
	for _, c := range []struct {
		name       string
		handles    []string
		categories []string
	}{
		{"the sign-in stream's fold", signInFold.Handles(), []string{CategorySignIn}},
		{"the account stream's fold", accountFold.Handles(), []string{CategoryUser}},
		{"the views", viewsHandlers.Covers(), []string{CategorySignIn, CategoryUser}},
		{"the activity", activityHandlers.Covers(), []string{activityCategory}},
	} {
		if err := events.CheckHandles(c.handles, c.categories...); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Every type belongs to a category that an aggregate folds.
	for _, typ := range events.Types() {
		if cat := eventstore.CategoryOf(typ); cat != CategorySignIn && cat != CategoryUser {
			t.Errorf("%s is of category %q, which no aggregate folds", typ, cat)
		}
	}
}
