package schemas_test

import (
	"strings"
	"testing"

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
