package operator

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/projections/async"
)

// The progress bar of a rebuild on a terminal names the version, grows
// with the log, and ends at 100%.
func TestProgressBarOfARebuild(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	report := progressBar(&out, "activity")
	report(async.Progress{Version: 2, Done: 0, Total: 1000})
	report(async.Progress{Version: 2, Done: 600, Total: 1500})
	report(async.Progress{Version: 2, Done: 1500, Total: 1500})
	got := out.String()
	for _, want := range []string{"activity version 2", "100%", "(1500/1500"} {
		if !strings.Contains(got, want) {
			t.Errorf("the bar lacks %q:\n%q", want, got)
		}
	}
}
