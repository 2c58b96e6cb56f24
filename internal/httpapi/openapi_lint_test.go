package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// lintInstall is the command that installs the linters of the OpenAPI
// document, pinned by lint/package-lock.json.
const lintInstall = "npm ci --prefix internal/httpapi/lint"

// linter is one of the OpenAPI linters: the script npm installs, the
// arguments that lint file with the configuration in lint/, and how to
// read its JSON report.
type linter struct {
	name   string
	script string
	args   func(file string) []string
	read   func(out []byte) (errs, warnings []string, err error)
}

var linters = []linter{
	{
		// Redocly's recommended rules (lint/redocly.yaml).
		name:   "redocly",
		script: "lint/node_modules/@redocly/cli/bin/cli.js",
		args: func(file string) []string {
			return []string{"lint", "--config", "lint/redocly.yaml", "--format=json", "--max-problems=1000", file}
		},
		read: func(out []byte) (errs, warnings []string, err error) {
			var report struct {
				Totals *struct {
					Errors int `json:"errors"`
				} `json:"totals"`
				Problems []struct {
					RuleID   string `json:"ruleId"`
					Severity string `json:"severity"`
					Message  string `json:"message"`
					Location []struct {
						Pointer string `json:"pointer"`
					} `json:"location"`
				} `json:"problems"`
			}
			if err := json.Unmarshal(out, &report); err != nil || report.Totals == nil {
				return nil, nil, fmt.Errorf("no report (%v)", err)
			}
			for _, p := range report.Problems {
				where := ""
				if len(p.Location) > 0 {
					where = p.Location[0].Pointer
				}
				line := fmt.Sprintf("%s at %s: %s", p.RuleID, where, p.Message)
				if p.Severity == "error" {
					errs = append(errs, line)
				} else {
					warnings = append(warnings, line)
				}
			}
			if len(errs) != report.Totals.Errors {
				return nil, nil, fmt.Errorf("the report counts %d errors and lists %d", report.Totals.Errors, len(errs))
			}
			return errs, warnings, nil
		},
	},
	{
		// Spectral's oas ruleset (lint/spectral.yaml).
		name:   "spectral",
		script: "lint/node_modules/@stoplight/spectral-cli/dist/index.js",
		args: func(file string) []string {
			return []string{"lint", "--ruleset", "lint/spectral.yaml", "--format", "json", file}
		},
		read: func(out []byte) (errs, warnings []string, err error) {
			var report []struct {
				Code     string `json:"code"`
				Message  string `json:"message"`
				Path     []any  `json:"path"`
				Severity int    `json:"severity"` // 0 error, 1 warning, 2 information, 3 hint
			}
			if err := json.Unmarshal(out, &report); err != nil || report == nil {
				return nil, nil, fmt.Errorf("no report (%v)", err)
			}
			for _, p := range report {
				path := make([]string, len(p.Path))
				for i, s := range p.Path {
					path[i] = fmt.Sprint(s)
				}
				line := fmt.Sprintf("%s at %s: %s", p.Code, strings.Join(path, "."), p.Message)
				if p.Severity == 0 {
					errs = append(errs, line)
				} else {
					warnings = append(warnings, line)
				}
			}
			return errs, warnings, nil
		},
	},
}

// TestOpenAPIPassesTheLinters runs Redocly's recommended rules and
// Spectral's oas ruleset, at the versions lint/package-lock.json pins, on
// the document the service serves at /openapi.json: any error fails it;
// warnings are logged. It fails, never skips, without Node.js or the
// linters.
func TestOpenAPIPassesTheLinters(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is not installed (%v): the linters of the OpenAPI document run on Node.js; then run `%s` in the module's root", err, lintInstall)
	}
	for _, l := range linters {
		if _, err := os.Stat(l.script); err != nil {
			t.Fatalf("%s is not installed (%v): run `%s` in the module's root", l.name, err, lintInstall)
		}
	}
	res := serve(t, httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}}), "GET", "/openapi.json", "192.0.2.1:1000", nil, nil)
	if res.status != http.StatusOK {
		t.Fatalf("GET /openapi.json: %s", res)
	}
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := os.WriteFile(file, res.body, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, l := range linters {
		t.Run(l.name, func(t *testing.T) {
			t.Parallel()
			// A loaded machine starts Node.js slowly; the lint itself takes
			// a second or two.
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, node, append([]string{l.script}, l.args(file)...)...)
			cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			errs, warnings, err := l.read(stdout.Bytes())
			if err != nil {
				t.Fatalf("%s: %v; exit %v\nstdout:\n%s\nstderr:\n%s", l.name, err, runErr, stdout.Bytes(), stderr.Bytes())
			}
			for _, w := range warnings {
				t.Logf("%s warns: %s", l.name, w)
			}
			for _, e := range errs {
				t.Errorf("%s: %s", l.name, e)
			}
			if runErr != nil && len(errs) == 0 {
				t.Errorf("%s exited with %v and reported no error\nstderr:\n%s", l.name, runErr, stderr.Bytes())
			}
		})
	}
}
