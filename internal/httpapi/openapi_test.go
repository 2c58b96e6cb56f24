package httpapi_test

import (
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// The OpenAPI document names every route the API serves, and nothing else,
// with the 405 and 500 that every route may answer, and the API serves it
// at /openapi.json.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi %q, want 3.1.0", doc.OpenAPI)
	}
	var documented []string
	for path, ops := range doc.Paths {
		for method, raw := range ops {
			documented = append(documented, strings.ToUpper(method)+" "+path)
			// Every path answers a method it does not take with 405, and
			// every operation may fail with 500 (a panic, a page that
			// cannot be drawn).
			var op struct {
				Responses map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatal(err)
			}
			for _, status := range []string{"405", "500"} {
				if op.Responses[status] == nil {
					t.Errorf("%s %s does not document %s", strings.ToUpper(method), path, status)
				}
			}
		}
	}
	var served []string
	for _, r := range httpapi.Routes() {
		served = append(served, r.Method+" "+r.Path)
	}
	slices.Sort(documented)
	slices.Sort(served)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is served but not documented", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("route %s is documented but not served", r)
		}
	}
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}})
	res := serve(t, h, "GET", "/openapi.json", "192.0.2.1:1000", nil, nil)
	if res.status != http.StatusOK || res.header.Get("Content-Type") != "application/json" || string(res.body) != string(raw) {
		t.Errorf("GET /openapi.json: %d %s, want the document", res.status, res.header.Get("Content-Type"))
	}
}
