package main

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// statusTable matches what `app projections status` prints for the
// activity projection alone, at one version: a table under a header, each
// cell matching its pattern.
func statusTable(version, behind, lag, state string) *regexp.Regexp {
	return regexp.MustCompile(`^PROJECTION +VERSION +BEHIND +LAG +STATE\nactivity +` + version + ` +` + behind + ` +` + lag + ` +` + state + `\n$`)
}

// `app projections rebuild activity` switches reads to a new version and
// says so; `status` then shows that version alone; progress lines go to
// stderr, which is no terminal here. An unknown name, or none, is an error
// that names the projections.
func TestProjectionsRebuildActivity(t *testing.T) {
	t.Parallel()
	for name, url := range testDatabases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{"DATABASE_URL": url(t), "DATA_KEY": testDataKey}
			if _, err := runApp(t, t.Context(), env, "migrate"); err != nil {
				t.Fatal(err)
			}
			for version := 2; version <= 3; version++ {
				var stdout, stderr bytes.Buffer
				if err := run(t.Context(), []string{"projections", "rebuild", "activity"}, getenv(env), &stdout, &stderr); err != nil {
					t.Fatalf("rebuild: %v\n%s", err, stderr.String())
				}
				want := fmt.Sprintf("rebuilt activity: version %d serves reads; version %d is dropped\n", version, version-1)
				if stdout.String() != want {
					t.Errorf("rebuild said %q, want %q", stdout.String(), want)
				}
				if line := fmt.Sprintf("activity version %d: 0 of 0 events applied\n", version); !strings.Contains(stderr.String(), line) {
					t.Errorf("stderr lacks the progress line %q:\n%s", line, stderr.String())
				}
				out, err := runApp(t, t.Context(), env, "projections", "status")
				if want := statusTable(fmt.Sprint(version), "0", `0\.0s`, "running"); err != nil || !want.MatchString(out) {
					t.Errorf("status: %q, %v; want %s", out, err, want)
				}
			}
			for _, args := range [][]string{{"projections", "rebuild"}, {"projections", "rebuild", "nope"}} {
				var ue *usageError
				if _, err := runApp(t, t.Context(), env, args...); !errors.As(err, &ue) || !strings.Contains(err.Error(), "activity, views") {
					t.Errorf("app %s: %v, want a usage error that names the projections", strings.Join(args, " "), err)
				}
			}
		})
	}
}
