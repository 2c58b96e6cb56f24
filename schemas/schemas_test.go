package schemas_test

import (
	"encoding/json"
	"maps"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	orgintegration "github.com/eventsourced/accounts/internal/org/integration"
	"github.com/eventsourced/accounts/internal/user/integration"
	"github.com/eventsourced/accounts/schemas"
)

const valid = `{"specversion":"1.0","id":"0190a3b1-0000-7000-8000-000000000001","source":"https://accounts.example.com",` +
	`"type":"user.email_changed","subject":"0190a3b1-0000-7000-8000-0000000000aa","time":"2031-03-04T05:06:07.123Z",` +
	`"datacontenttype":"application/json","data":{"user_id":"0190a3b1-0000-7000-8000-0000000000aa","email":"ada@example.com","version":5}}`

func TestCheckAcceptsAValidEvent(t *testing.T) {
	for name, payload := range map[string]string{
		"untraced": valid,
		"traced": strings.Replace(valid, `"data":`,
			`"traceparent":"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01","tracestate":"vendor=a\"b","data":`, 1),
	} {
		if err := schemas.Check([]byte(payload)); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Every schema is of a type that a domain publishes today, or of a
// legacy type whose events may still wait in an outbox, and every such
// type has one.
func TestEverySchemaIsOfAPublishedType(t *testing.T) {
	types, err := schemas.Types()
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Concat(integration.Types(), slices.Collect(maps.Keys(integration.Legacy())), orgintegration.Types())
	slices.Sort(want)
	if !slices.Equal(types, want) {
		t.Errorf("schemas for %v, want one for each of %v", types, want)
	}
}

// memberRemoved is an organization's event as the service publishes it.
const memberRemoved = `{"specversion":"1.0","id":"0190a3b1-0000-7000-8000-000000000002","source":"https://accounts.example.com",` +
	`"type":"com.github.eventsourced.accounts.org.member_removed.v1","subject":"0190a3b1-0000-7000-8000-0000000000cc",` +
	`"time":"2031-03-04T05:06:07.123Z","datacontenttype":"application/json","data":{"organization_id":"0190a3b1-0000-7000-8000-0000000000cc",` +
	`"user_id":"0190a3b1-0000-7000-8000-0000000000aa","reason":"erased","version":7}}`

// The schemas of an organization's events hold them to their reasons and
// roles, and admit no address.
func TestCheckHoldsOrganizationsEventsToTheirContract(t *testing.T) {
	if err := schemas.Check([]byte(memberRemoved)); err != nil {
		t.Errorf("a valid event: %v", err)
	}
	for name, payload := range map[string]string{
		"another reason":  strings.Replace(memberRemoved, `"erased"`, `"banned"`, 1),
		"no organization": strings.Replace(memberRemoved, `"organization_id":"0190a3b1-0000-7000-8000-0000000000cc",`, ``, 1),
		"an address":      strings.Replace(memberRemoved, `"version":7`, `"version":7,"email":"ada@example.com"`, 1),
		"a role":          strings.Replace(memberRemoved, `"version":7`, `"version":7,"role":"owner"`, 1),
		"a bad subject":   strings.Replace(memberRemoved, `"subject":"0190a3b1-0000-7000-8000-0000000000cc"`, `"subject":"org"`, 1),
		"role changed to admin": strings.NewReplacer(`org.member_removed`, `org.role_changed`,
			`"reason":"erased"`, `"role":"admin"`).Replace(memberRemoved),
	} {
		if err := schemas.Check([]byte(payload)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The schemas are strict enough to catch what a consumer would trip over.
func TestCheckRefusesWhatBreaksTheContract(t *testing.T) {
	for name, payload := range map[string]string{
		"no version":        strings.Replace(valid, `,"version":5`, ``, 1),
		"a token":           strings.Replace(valid, `"version":5`, `"version":5,"token":"x"`, 1),
		"version zero":      strings.Replace(valid, `"version":5`, `"version":0`, 1),
		"no subject":        strings.Replace(valid, `"subject":"0190a3b1-0000-7000-8000-0000000000aa",`, ``, 1),
		"not a date":        strings.Replace(valid, `2031-03-04T05:06:07.123Z`, `yesterday`, 1),
		"not an address":    strings.Replace(valid, `ada@example.com`, `ada`, 1),
		"unknown type":      strings.Replace(valid, `user.email_changed`, `user.renamed`, 1),
		"another version":   strings.Replace(valid, `"specversion":"1.0"`, `"specversion":"0.3"`, 1),
		"a bad traceparent": strings.Replace(valid, `"data":`, `"traceparent":"00-4bf92f3577b34da6-01","data":`, 1),
	} {
		if err := schemas.Check([]byte(payload)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// Each legacy schema is deprecated, and describes the same data as the
// schema of the type that replaced it, so that a consumer reads both
// alike; the envelopes differ only in their type.
func TestLegacySchemasDescribeTheDataOfTheirReplacements(t *testing.T) {
	for legacy, typ := range integration.Legacy() {
		t.Run(legacy, func(t *testing.T) {
			old, current := readSchema(t, legacy), readSchema(t, typ)
			if old["deprecated"] != true || current["deprecated"] != nil {
				t.Errorf("deprecated: %v for %s, %v for %s; want only the legacy one", old["deprecated"], legacy, current["deprecated"], typ)
			}
			for _, s := range []map[string]any{old, current} {
				delete(s["properties"].(map[string]any), "type")
			}
			if a, b := withoutDescriptions(old["properties"]), withoutDescriptions(current["properties"]); !reflect.DeepEqual(a, b) {
				t.Errorf("%s and %s describe different events:\n%v\n%v", legacy, typ, a, b)
			}
			if !reflect.DeepEqual(old["required"], current["required"]) {
				t.Errorf("%s requires %v, %s %v", legacy, old["required"], typ, current["required"])
			}
		})
	}
	// So the event of TestCheckAcceptsAValidEvent passes under its new
	// type too.
	event := strings.Replace(valid, `"type":"user.email_changed"`, `"type":"`+integration.TypeEmailChanged+`"`, 1)
	if err := schemas.Check([]byte(event)); err != nil {
		t.Errorf("%s: %v", integration.TypeEmailChanged, err)
	}
}

// readSchema returns the schema of typ, decoded.
func readSchema(t *testing.T, typ string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(typ + ".json")
	if err != nil {
		t.Fatal(err)
	}
	var s map[string]any
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("%s: %v", typ, err)
	}
	return s
}

// withoutDescriptions returns v with the descriptions of every level
// taken out.
func withoutDescriptions(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range v {
			if k != "description" {
				out[k] = withoutDescriptions(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = withoutDescriptions(e)
		}
		return out
	}
	return v
}
