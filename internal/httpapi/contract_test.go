package httpapi_test

import (
	"bytes"
	"encoding/json"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/eventsourced/accounts/internal/requestid"
)

// contract is the OpenAPI document, compiled once: OpenAPI 3.1's schemas
// are JSON Schema 2020-12, so each response body is checked against the
// schema the document gives its route, status and content type.
var contract = sync.OnceValues(func() (*contractDoc, error) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		return nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource("openapi.json", doc); err != nil {
		return nil, err
	}
	var paths struct {
		Paths map[string]map[string]operation `json:"paths"`
	}
	if err := json.Unmarshal(raw, &paths); err != nil {
		return nil, err
	}
	return &contractDoc{compiler: c, paths: paths.Paths, schemas: map[string]*jsonschema.Schema{}}, nil
})

type contractDoc struct {
	compiler *jsonschema.Compiler
	paths    map[string]map[string]operation
	mu       sync.Mutex
	schemas  map[string]*jsonschema.Schema
}

// operation is what the checks read of an operation of the document.
type operation struct {
	RequestBody struct {
		Content map[string]json.RawMessage `json:"content"`
	} `json:"requestBody"`
	Responses map[string]struct {
		Content map[string]json.RawMessage `json:"content"`
	} `json:"responses"`
}

// validate checks body against the schema at the JSON Pointer loc of the
// document.
func (doc *contractDoc) validate(t *testing.T, loc string, body []byte) error {
	t.Helper()
	doc.mu.Lock()
	sch, ok := doc.schemas[loc]
	if !ok {
		var err error
		if sch, err = doc.compiler.Compile(loc); err != nil {
			doc.mu.Unlock()
			t.Fatalf("openapi.json: %s: %v", loc, err)
		}
		doc.schemas[loc] = sch
	}
	doc.mu.Unlock()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// template returns the path of the document that path is an instance of:
// path itself when the document has it, or one whose {parameters} match
// its segments, such as /v1/orgs/{id} for /v1/orgs/0190..., or path
// when none does.
func (doc *contractDoc) template(path string) string {
	if _, ok := doc.paths[path]; ok {
		return path
	}
	segments := strings.Split(path, "/")
	for p := range doc.paths {
		want := strings.Split(p, "/")
		if len(want) != len(segments) || !strings.Contains(p, "{") {
			continue
		}
		match := true
		for i, w := range want {
			param := strings.HasPrefix(w, "{") && strings.HasSuffix(w, "}")
			if (param && segments[i] == "") || (!param && w != segments[i]) {
				match = false
				break
			}
		}
		if match {
			return p
		}
	}
	return path
}

// pointer escapes s as a JSON Pointer token.
func pointer(s string) string {
	return url.PathEscape(strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1"))
}

// checkContract fails t when the answer to method path is not one the
// document gives: no valid X-Request-Id (which every answer carries, of a
// route or not), an undocumented route, status or content type, or a JSON
// body that does not match its schema; and when a request that succeeded
// (2xx) sent a body that does not match the document's. A path with
// parameters, such as /v1/me/sessions/{id}, is checked against its
// template. A route the document lacks is left to
// TestOpenAPIDocumentsEveryRoute; a 404 or 405 of no route is not an
// operation.
func checkContract(t *testing.T, method, path string, reqBody []byte, r response) {
	t.Helper()
	if id := r.header.Get(requestid.Header); !requestid.Valid(id) {
		t.Errorf("%s %s %d: X-Request-Id %q, want a valid request ID on every answer", method, path, r.status, id)
	}
	doc, err := contract()
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	path, _, _ = strings.Cut(path, "?")
	path = doc.template(path)
	op, ok := doc.paths[path][strings.ToLower(method)]
	if !ok {
		return
	}
	status := strconv.Itoa(r.status)
	resp, ok := op.Responses[status]
	if !ok {
		t.Errorf("%s %s answered %d, which the document does not give", method, path, r.status)
		return
	}
	ct, _, _ := strings.Cut(r.header.Get("Content-Type"), ";")
	if len(resp.Content) == 0 {
		if len(r.body) > 0 {
			t.Errorf("%s %s %d has a body the document does not give: %s", method, path, r.status, r.body)
		}
		return
	}
	if _, ok := resp.Content[ct]; !ok {
		t.Errorf("%s %s %d answered %s, which the document does not give", method, path, r.status, ct)
		return
	}
	if ct != "application/json" && ct != "application/problem+json" {
		return
	}
	opLoc := "openapi.json#/paths/" + pointer(path) + "/" + strings.ToLower(method)
	if err := doc.validate(t, opLoc+"/responses/"+status+"/content/"+pointer(ct)+"/schema", r.body); err != nil {
		t.Errorf("%s %s %d: body does not match the document: %v\n%s", method, path, r.status, err, r.body)
	}
	if _, json := op.RequestBody.Content["application/json"]; r.status < 300 && json {
		if err := doc.validate(t, opLoc+"/requestBody/content/application~1json/schema", reqBody); err != nil {
			t.Errorf("%s %s succeeded with a request body the document refuses: %v\n%s", method, path, err, reqBody)
		}
	}
}
