package org

import (
	"testing"

	"github.com/eventsourced/accounts/internal/eventstore"
)

// TestFoldAndProjectionHandleEveryType fails when the fold, the views
// projection or the activity leaves out a registered type, or handles one that nobody
// registered: a type added to the domain must be decided on by each of
// them, since none has a default.
func TestFoldAndProjectionHandleEveryType(t *testing.T) {
	for _, c := range []struct {
		name    string
		handles []string
	}{
		{"the organization's fold", orgFold.Handles()},
		{"the views", viewsHandlers.Covers()},
		{"the activity", activityHandlers.Covers()},
	} {
		if err := events.CheckHandles(c.handles, CategoryOrg); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	// Every type is of the category of the organizations' streams.
	for _, typ := range events.Types() {
		if cat := eventstore.CategoryOf(typ); cat != CategoryOrg {
			t.Errorf("%s is of category %q, which no aggregate of the domain folds", typ, cat)
		}
	}
}
