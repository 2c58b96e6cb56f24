// Package schemas holds the JSON Schemas of the integration events, the
// public contract of what this service publishes, one file per event type,
// named for the type, and checks payloads against them. Tests use it on
// the payloads the service really produces.
//
// The types are namespaced and versioned
// ("com.github.eventsourced.accounts.user.registered.v1"). The schemas of
// the types events had before that ("user.registered") stay, marked
// deprecated: events of those types added to an outbox before the upgrade
// are still delivered, with the same data as their replacements.
package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed *.json
var files embed.FS

// Types returns the event types that have a schema.
func Types() ([]string, error) {
	names, err := fs.Glob(files, "*.json")
	if err != nil {
		return nil, err
	}
	types := make([]string, len(names))
	for i, n := range names {
		types[i] = strings.TrimSuffix(n, ".json")
	}
	return types, nil
}

// compiled holds each type's schema once compiled.
var compiled sync.Map // type -> *jsonschema.Schema

// schema returns the compiled schema of typ.
func schema(typ string) (*jsonschema.Schema, error) {
	if sch, ok := compiled.Load(typ); ok {
		return sch.(*jsonschema.Schema), nil
	}
	raw, err := files.ReadFile(typ + ".json")
	if err != nil {
		return nil, fmt.Errorf("schemas: no schema for type %q", typ)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", typ, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	url := typ + ".json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", typ, err)
	}
	sch, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schemas: %s: %w", typ, err)
	}
	compiled.Store(typ, sch)
	return sch, nil
}

// Check validates the CloudEvent payload against the schema of its type,
// formats (uuid, date-time, email) included.
func Check(payload []byte) error {
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(payload, &head); err != nil {
		return fmt.Errorf("schemas: %w", err)
	}
	sch, err := schema(head.Type)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("schemas: %w", err)
	}
	if err := sch.Validate(v); err != nil {
		return fmt.Errorf("schemas: %s: %w", head.Type, err)
	}
	return nil
}
