package timingtest

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// RerunWithoutRaceDetector runs the test t, when its binary was built with
// the race detector, in a binary built without it: go test -race=false in
// the test's package directory, with the same environment. It logs the
// measurements of that run, fails t as that run fails, and reports true:
// the caller then returns at once. Without the race detector it does
// nothing and reports false.
func RerunWithoutRaceDetector(t *testing.T) bool {
	t.Helper()
	if !RaceDetector {
		return false
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	// go test splits -run at each slash and matches each level's name
	// as a regular expression: each is quoted, so that a name with a
	// dot or a bracket matches itself.
	levels := strings.Split(t.Name(), "/")
	for i, name := range levels {
		levels[i] = "^" + regexp.QuoteMeta(name) + "$"
	}
	pattern := strings.Join(levels, "/")
	cmd := exec.CommandContext(t.Context(), goTool, "test", "-race=false", "-count=1", "-v", "-run", pattern, ".")
	out, err := cmd.CombinedOutput()
	// A loop over a slice, not an iterator, whose body would be a
	// function that t.Helper does not cover.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "median") || strings.Contains(line, "measurement") {
			t.Log(strings.TrimSpace(line))
		}
	}
	if err != nil {
		t.Fatalf("%s without the race detector: %v\n%s", cmd, err, out)
	}
	if !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("%s without the race detector ran no such test:\n%s", cmd, out)
	}
	return true
}
