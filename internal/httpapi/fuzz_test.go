package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/org"
	"github.com/eventsourced/accounts/internal/user"
)

// fuzzEndpoints are the endpoints the fuzzer sends bodies to; field is the
// one field of a JSON endpoint's body, "" for the endpoints without a body.
var fuzzEndpoints = []struct{ method, path, field string }{
	{"POST", "/v1/sign-in-links", "email"},
	{"POST", "/v1/sessions", "code"},
	{"POST", "/v1/me/email-change", "new_email"},
	{"POST", "/v1/email-changes", "code"},
	{"GET", "/v1/me", ""},
	{"DELETE", "/v1/sessions/current", ""},
	{"POST", "/v1/orgs", "name"},
	{"GET", "/v1/orgs", ""},
	{"POST", "/v1/invitations", "code"},
	{"PATCH", fuzzMemberPath, "role"},
	{"POST", "/v1/invitations/offer", "code"},
}

// fuzzMemberPath is the path of fakeMember in fakeOrg.
var fuzzMemberPath = "/v1/orgs/" + fakeOrgID.String() + "/members/" + fakeMember.UserID.String()

// fuzzContentTypes are the Content-Types the fuzzer picks from, with
// whether they are JSON.
var fuzzContentTypes = []struct {
	value string
	json  bool
}{
	{"", true}, // no header: taken as JSON
	{"application/json", true},
	{"application/json; charset=utf-8", true},
	{"APPLICATION/JSON", true},
	{"text/plain", false},
	{"application/x-www-form-urlencoded", false},
	{"application/problem+json", false},
	{"application/json; charset", false},
}

// fuzzAuths are the Authorization headers the fuzzer picks from, with the
// bearer token each carries.
var fuzzAuths = []struct{ header, token string }{
	{"", ""},
	{"Bearer " + fakeToken, fakeToken},
	{"bearer  " + fakeToken + " ", fakeToken},
	{"Bearer " + strings.Repeat("b", 32), strings.Repeat("b", 32)},
	{"Basic " + fakeToken, ""},
	{"Bearer", ""},
}

// outcome is one acceptable answer: a status and its problem type, "" for
// a success.
type outcome struct {
	status int
	typ    string
}

// strictField is the decoding the API promises, written independently of
// it: body is at most 4 KiB, one JSON object whose keys are all field,
// spelt exactly, whose values are strings or null, and name it at most
// once. It returns the field's value.
// A bare null is not an object.
func strictField(body []byte, field string) (string, bool) {
	if len(body) > 4<<10 || !json.Valid(body) {
		return "", false
	}
	trimmed := bytes.Trim(body, " \t\r\n")
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	var value string
	keys := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if key, _ := tok.(string); key != field {
			return "", false
		}
		if keys++; keys > 1 { // The one field, given twice.
			return "", false
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", false
		}
		if string(raw) == "null" {
			continue // encoding/json leaves the field as it was
		}
		if err := json.Unmarshal(raw, &value); err != nil {
			return "", false
		}
	}
	return value, true
}

// expected returns the answers the API may give to a request, from the
// contract of the API and the fake domain's rules.
func expected(ep int, jsonType bool, token string, body []byte) []outcome {
	e := fuzzEndpoints[ep]
	route := e.method + " " + e.path
	switch route {
	case "GET /v1/me", "GET /v1/orgs":
		if token == fakeToken {
			return []outcome{{200, ""}}
		}
		return []outcome{{401, httpapi.TypeUnauthenticated}}
	case "DELETE /v1/sessions/current":
		if token == fakeToken {
			return []outcome{{204, ""}}
		}
		return []outcome{{401, httpapi.TypeUnauthenticated}}
	case "POST /v1/me/email-change", "POST /v1/orgs", "POST /v1/invitations", "PATCH " + fuzzMemberPath:
		// A bearer route's body is not read without a token.
		if token == "" {
			return []outcome{{401, httpapi.TypeUnauthenticated}}
		}
	}
	if !jsonType {
		return []outcome{{415, httpapi.TypeUnsupportedMediaType}}
	}
	value, ok := strictField(body, e.field)
	if !ok {
		if len(body) > 4<<10 {
			// Refused when the decoder sees the syntax error or when it
			// reaches the limit, whichever comes first.
			return []outcome{{400, httpapi.TypeBadRequest}, {413, httpapi.TypeBodyTooLarge}}
		}
		return []outcome{{400, httpapi.TypeBadRequest}}
	}
	var err error
	success := outcome{}
	switch e.path {
	case "/v1/orgs":
		_, err = fakeOrgs{}.Create(context.Background(), token, value)
		success.status = 201
	case "/v1/invitations":
		_, err = fakeOrgs{}.Accept(context.Background(), token, value)
		success.status = 200
	case "/v1/invitations/offer":
		_, err = fakeOrgs{}.Offer(context.Background(), value)
		success.status = 200
	case fuzzMemberPath:
		_, err = fakeOrgs{}.ChangeRole(context.Background(), token, fakeOrgID, fakeMember.UserID, org.Role(value))
		success.status = 200
	case "/v1/sign-in-links":
		err = fakeUsers{}.RequestSignInLink(context.Background(), value)
		success.status = 202
	case "/v1/sessions":
		_, err = fakeUsers{}.SignIn(context.Background(), value)
		success.status = 201
	case "/v1/me/email-change":
		err = fakeUsers{}.RequestEmailChange(context.Background(), token, value)
		success.status = 202
	case "/v1/email-changes":
		_, err = fakeUsers{}.ConfirmEmailChange(context.Background(), value, "")
		success.status = 200
	}
	switch {
	case err == nil:
		return []outcome{success}
	case errors.Is(err, user.ErrBadEmail):
		return []outcome{{400, httpapi.TypeBadEmail}}
	case errors.Is(err, user.ErrTooManyRequests):
		return []outcome{{429, httpapi.TypeTooManyRequests}}
	case errors.Is(err, user.ErrUnauthenticated):
		return []outcome{{401, httpapi.TypeUnauthenticated}}
	case errors.Is(err, user.ErrEmailTaken):
		return []outcome{{409, httpapi.TypeEmailTaken}}
	case errors.Is(err, user.ErrInvalidCode) && e.path == "/v1/sessions":
		return []outcome{{401, httpapi.TypeInvalidCode}}
	case errors.Is(err, user.ErrInvalidCode), errors.Is(err, org.ErrInvalidCode):
		return []outcome{{400, httpapi.TypeInvalidCode}}
	case errors.Is(err, org.ErrInvalidName):
		return []outcome{{400, httpapi.TypeInvalidName}}
	case errors.Is(err, org.ErrInvalidRole):
		return []outcome{{400, httpapi.TypeInvalidRole}}
	case errors.Is(err, org.ErrTooManyOrganizations):
		return []outcome{{409, httpapi.TypeTooManyOrganizations}}
	case errors.Is(err, org.ErrAlreadyMember):
		return []outcome{{409, httpapi.TypeAlreadyMember}}
	case errors.Is(err, org.ErrFull):
		return []outcome{{409, httpapi.TypeOrganizationFull}}
	case errors.Is(err, org.ErrWrongAddress):
		return []outcome{{403, httpapi.TypeWrongAddress}}
	}
	panic("fake domain error without an expected answer: " + err.Error())
}

// FuzzRequestDecoding sends the fuzzer's body to an endpoint it picks, with
// a Content-Type and Authorization it picks, to the API over the fake
// domain, and checks that the answer is never a 5xx, is a success or a
// problem+json of a known type, and is the one the contract calls for.
//
// Long bodies come from pad: padLen(pad) copies of padByte(pad) inserted at
// padAt, so that the fuzzer's own inputs stay short. Go's fuzzer minimises
// every new interesting input in time quadratic in its length, and long
// raw inputs stalled it for minutes.
func FuzzRequestDecoding(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed.ep, seed.ct, seed.auth, seed.body, seed.pad, seed.padAt)
	}
	h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Orgs: fakeOrgs{}, Log: slog.New(slog.DiscardHandler)})

	f.Fuzz(func(t *testing.T, epPick, ctPick, authPick uint8, raw []byte, pad, padAt uint16) {
		if len(raw) > maxRaw {
			t.Skip("long bodies come from pad")
		}
		body := padded(raw, pad, padAt)
		ep := int(epPick) % len(fuzzEndpoints)
		ct := fuzzContentTypes[int(ctPick)%len(fuzzContentTypes)]
		auth := fuzzAuths[int(authPick)%len(fuzzAuths)]
		e := fuzzEndpoints[ep]
		header := map[string]string{}
		if ct.value != "" {
			header["Content-Type"] = ct.value
		}
		if auth.header != "" {
			header["Authorization"] = auth.header
		}
		r := serve(t, h, e.method, e.path, "", header, body)
		what := e.method + " " + e.path + " as " + strconv.Quote(ct.value) + " with " + strconv.Quote(auth.header) + " and a body of " + strconv.Itoa(len(body)) + " bytes (see the input)"

		if r.status >= 500 {
			t.Fatalf("%s: server error %s", what, r)
		}
		got := outcome{status: r.status}
		if r.status >= 300 {
			p, ok := parseProblem(t, what, r)
			if !ok {
				t.FailNow()
			}
			got.typ = p.Type
			if p.Type == httpapi.TypeTooManyRequests {
				wantRetryAfter(t, what, r)
			}
			if p.Type == httpapi.TypeUnauthenticated && r.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", what)
			}
		} else {
			checkSuccessBody(t, what, r)
		}
		want := expected(ep, ct.json, auth.token, body)
		if !slices.Contains(want, got) {
			t.Errorf("%s: got %d %q, want one of %v", what, got.status, got.typ, want)
		}
	})
}

// checkSuccessBody checks the body of a success answer of the fake domain.
func checkSuccessBody(t *testing.T, what string, r response) {
	t.Helper()
	switch r.status {
	case 202, 204:
		if len(r.body) != 0 {
			t.Errorf("%s: %d with body %q", what, r.status, r.body)
		}
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.header.Get("Content-Type")); mt != "application/json" {
		t.Errorf("%s: %d with Content-Type %q", what, r.status, r.header.Get("Content-Type"))
	}
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Errorf("%s: %d with body %q: %v", what, r.status, r.body, err)
	}
}

// maxRaw is the longest body the fuzzer supplies itself; longer ones come
// from pad.
const maxRaw = 256

// padded returns raw with padLen(pad) copies of padByte(pad) inserted at
// padAt (modulo its length + 1).
func padded(raw []byte, pad, padAt uint16) []byte {
	n := padLen(pad)
	if n == 0 {
		return raw
	}
	at := int(padAt) % (len(raw) + 1)
	out := make([]byte, 0, len(raw)+n)
	out = append(out, raw[:at]...)
	out = append(out, bytes.Repeat([]byte{padByte(pad)}, n)...)
	return append(out, raw[at:]...)
}

// padBytes are the bytes a pad repeats: JSON whitespace, a letter, an
// opening bracket and brace, a quote and a multi-byte rune's first byte.
const padBytes = " a[{\"\xc3"

func padByte(pad uint16) byte { return padBytes[int(pad)%len(padBytes)] }

// padLen is up to 8 KiB, twice the body limit.
func padLen(pad uint16) int { return int(pad) / len(padBytes) % (8<<10 + 1) }

// padFor returns the pad of n copies of b.
func padFor(b byte, n int) uint16 {
	return uint16(n*len(padBytes) + strings.IndexByte(padBytes, b))
}

type fuzzSeed struct {
	ep, ct, auth uint8
	body         []byte
	pad, padAt   uint16
}

// fuzzSeeds are valid bodies, each malformed class, huge and unicode
// inputs, for every endpoint, Content-Type and Authorization.
func fuzzSeeds() []fuzzSeed {
	var seeds []fuzzSeed
	add := func(ep, ct, auth int, body string) {
		seeds = append(seeds, fuzzSeed{uint8(ep), uint8(ct), uint8(auth), []byte(body), 0, 0})
	}
	addPadded := func(ep int, body string, b byte, n, at int) {
		seeds = append(seeds, fuzzSeed{uint8(ep), 1, 1, []byte(body), padFor(b, n), uint16(at)})
	}
	code := strings.Repeat("a", 32)
	for ep, e := range fuzzEndpoints {
		f := jsonString(e.field)
		values := []string{"ada@example.com", " Ada@Example.COM ", code, "taken" + code[5:], "limited@example.com", "taken@example.com", "",
			"owner", "member", "Acme", "too many", "wrong" + code[5:], strings.Repeat("é", 101)}
		for _, v := range values {
			add(ep, 1, 1, "{"+f+":"+jsonString(v)+"}")
		}
		good := "{" + f + ":" + jsonString("ada@example.com") + "}"
		for _, body := range []string{
			// Malformed classes.
			"{" + f + `:"ada@example.com","extra":1}`,
			`{"extra":"x"}`,
			good + " x",
			good + good,
			good + "\n" + good,
			e.field + "=ada@example.com",
			"",
			"   ",
			"{" + f + ":",
			"[" + good + "]",
			`"ada@example.com"`,
			"5",
			"null",
			"{" + f + ":null}",
			"{" + f + ":5}",
			"{" + f + ":true}",
			"{" + f + ":[]}",
			"{" + f + ":{}}",
			"{" + strings.ToUpper(f) + `:"ada@example.com"}`,
			"{" + f + `:"a@example.com",` + f + `:"b@example.com"}`,
			"{" + f + `:"a@example.com",` + f + `:null}`,
			"{" + f + `:"\x"}`,
			"{" + f + `:"\ud800"}`,
			"\ufeff" + good,
			"/**/" + good,
			// Long.
			"{" + f + ":" + jsonString(strings.Repeat("a", 65)+"@example.com") + "}",
			strings.Repeat(`{"a":`, 40),
			// Unicode.
			"{" + f + `:"ädä@exämple.com"}`,
			"{" + f + `:"ada@例え.jp"}`,
			"{" + f + `:"\u0061da@example.com"}`,
			"{" + f + `:"ada\u0000@example.com"}`,
			"{" + f + `:"ada@example.com\u2028"}`,
			"{" + f + `:"👩‍💻@example.com"}`,
			"{" + f + ":\"\xff\xfe@example.com\"}",
			"{\"\xffemail\":\"ada@example.com\"}",
			"{" + f + `:"` + strings.Repeat("ß", 20) + `"}`,
		} {
			add(ep, 1, 1, body)
		}
		// Huge: at, just over and far over the 4 KiB limit, outside and
		// inside the value, and deep nesting.
		addPadded(ep, good, ' ', 4<<10-len(good), len(good))
		addPadded(ep, good, ' ', 4<<10-len(good)+1, len(good))
		addPadded(ep, good, ' ', 4<<10-len(good), 0)
		addPadded(ep, good, ' ', 5000, len(f)+2)
		addPadded(ep, good, 'a', 5000, len(f)+2)
		addPadded(ep, good, 0xc3, 3000, len(f)+2)
		addPadded(ep, "", '[', 5000, 0)
		addPadded(ep, "", '{', 5000, 0)
		addPadded(ep, `""`, '"', 5000, 1)
		// Addresses of 254 and 255 characters.
		addPadded(ep, "{"+f+`:"@example.com"}`, 'a', 242, len(f)+2)
		addPadded(ep, "{"+f+`:"@example.com"}`, 'a', 243, len(f)+2)
		for ct := range fuzzContentTypes {
			add(ep, ct, 1, good)
		}
		for auth := range fuzzAuths {
			add(ep, 1, auth, good)
		}
	}
	return seeds
}
