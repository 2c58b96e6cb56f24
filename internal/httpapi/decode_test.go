package httpapi_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/user/mail"
)

// endpoint is a JSON endpoint with a value of its field that it would
// accept, so that a body the decoder wrongly let through would change
// something.
type endpoint struct {
	path, field string
	// prepare returns a token (or "") and the value that would succeed.
	prepare func(t *testing.T, e *env) (token, value string)
	success int
}

var jsonEndpoints = []endpoint{
	{
		path: "/v1/sign-in-links", field: "email", success: http.StatusAccepted,
		prepare: func(*testing.T, *env) (string, string) { return "", "ada@example.com" },
	},
	{
		path: "/v1/sessions", field: "code", success: http.StatusCreated,
		prepare: func(t *testing.T, e *env) (string, string) {
			return "", e.link(t, "ada@example.com", "ada@example.com")
		},
	},
	{
		path: "/v1/me/email-change", field: "new_email", success: http.StatusAccepted,
		prepare: func(t *testing.T, e *env) (string, string) {
			return e.signIn(t, "ada@example.com").Token, "new@example.com"
		},
	},
	{
		path: "/v1/email-changes", field: "code", success: http.StatusOK,
		prepare: func(t *testing.T, e *env) (string, string) {
			s := e.signIn(t, "ada@example.com")
			wantStatus(t, "email change", e.post(t, "/v1/me/email-change", s.Token, newEmailBody("new@example.com")), http.StatusAccepted)
			return "", e.oneMail(t, mail.TopicEmailChange, "new@example.com", "/confirm-email")
		},
	},
}

// TestDecoding holds the decoding of request bodies to its rules: one JSON
// object of known fields, at most 4 KiB, after the token is checked.
func TestDecoding(t *testing.T) {
	t.Parallel()
	t.Run("strict", testStrictDecoding)
	t.Run("the body limit", testBodyLimitBoundary)
	t.Run("email change checks the token first", testEmailChangeChecksTokenFirst)
	t.Run("a malformed query string without a body", testMalformedQueryWithoutBody)
	t.Run("a body that stops arriving", testBodyThatStopsArriving)
	t.Run("a body declared over the limit", testBodyDeclaredOverTheLimit)
}

// testBodyDeclaredOverTheLimit: a body whose Content-Length is over 4 KiB
// is refused with 413 before the server reads it, and the connection
// closes, though the client sends a short body and no more: the answer
// does not wait for the read timeout, which would answer 400.
func testBodyDeclaredOverTheLimit(t *testing.T) {
	t.Parallel()
	e := setupWith(t, options{readTimeout: 5 * time.Second})
	before := e.snapshot(t)
	for _, c := range []struct{ name, path, contentType, body string }{
		{"JSON", "/v1/sign-in-links", "application/json", emailBody("ada@example.com")},
		{"a page's form", "/", "application/x-www-form-urlencoded", "email=ada%40example.com"},
	} {
		for _, declared := range []int{maxBody + 1, 1 << 20} {
			conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", c.path, c.contentType, declared, c.body)
			res, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("%s declared %d bytes: %v", c.name, declared, err)
			}
			_ = res.Body.Close()
			_ = conn.Close()
			if res.StatusCode != http.StatusRequestEntityTooLarge || !res.Close {
				t.Errorf("%s declared %d bytes: status %d, closing %v; want 413 and the connection closed", c.name, declared, res.StatusCode, res.Close)
			}
		}
	}
	e.unchanged(t, "bodies declared over the limit", before)
}

// testBodyThatStopsArriving: a body cut short by the server's read timeout
// is refused with a detail that says so, not the socket's error, which
// names the server's address and the client's.
func testBodyThatStopsArriving(t *testing.T) {
	t.Parallel()
	e := setupWith(t, options{readTimeout: 200 * time.Millisecond})
	before := e.snapshot(t)
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The body promises 28 bytes and sends 8; the server's read timeout,
	// not the test, ends the wait.
	if _, err := io.WriteString(conn, "POST /v1/sign-in-links HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 28\r\n\r\n{\"email\""); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("status %d, want 400: %s", res.StatusCode, body)
	}
	for _, leak := range []string{"127.0.0.1", "tcp", "i/o timeout"} {
		if strings.Contains(string(body), leak) {
			t.Errorf("the problem names %q: %s", leak, body)
		}
	}
	if !strings.Contains(string(body), "did not arrive") {
		t.Errorf("the problem does not say that the body did not arrive: %s", body)
	}
	e.unchanged(t, "a body that stopped arriving", before)
}

// malformedQueries are query strings that url.ParseQuery refuses.
var malformedQueries = []string{"?%zz", "?a;b", "?email=%"}

// testMalformedQueryWithoutBody: the routes that take no body refuse a
// query string that does not parse too, and change nothing; the account
// and its session are still there after the DELETEs.
func testMalformedQueryWithoutBody(t *testing.T) {
	t.Parallel()
	e := setup(t)
	token := e.signIn(t, "ada@example.com").Token
	for _, path := range []string{"/v1/me", "/v1/sessions/current"} {
		for _, method := range []string{http.MethodGet, http.MethodDelete} {
			if method == http.MethodGet && path != "/v1/me" {
				continue
			}
			for _, q := range malformedQueries {
				before := e.snapshot(t)
				r := e.send(t, request{method: method, path: path + q, token: token})
				wantProblem(t, method+" "+path+q, r, 400, httpapi.TypeBadRequest)
				e.unchanged(t, method+" "+path+q, before)
			}
		}
	}
	wantStatus(t, "GET /v1/me after them", e.send(t, request{method: http.MethodGet, path: "/v1/me", token: token}), http.StatusOK)
}

// testStrictDecoding sends every JSON endpoint each kind of malformed body,
// built around a value that would succeed, and checks the problem and that
// nothing changed; then the well-formed body succeeds.
func testStrictDecoding(t *testing.T) {
	t.Parallel()
	for _, ep := range jsonEndpoints {
		t.Run(strings.TrimPrefix(ep.path, "/v1/"), func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			token, value := ep.prepare(t, e)
			f := jsonString(ep.field)
			v := jsonString(value)
			good := "{" + f + ":" + v + "}"
			// A value with enough spaces inside that the body is over the
			// limit; the domain trims them, so it would succeed if read.
			padded := "{" + f + ":" + jsonString(strings.Repeat(" ", maxBody)+value) + "}"

			bad := []struct {
				what, body string
				status     int
				typ        string
			}{
				{"an unknown field", "{" + f + ":" + v + `,"extra":1}`, 400, httpapi.TypeBadRequest},
				{"only an unknown field", `{"extra":` + v + `}`, 400, httpapi.TypeBadRequest},
				{"trailing data", good + " x", 400, httpapi.TypeBadRequest},
				{"a trailing brace", good + "}", 400, httpapi.TypeBadRequest},
				{"a trailing number", good + "1", 400, httpapi.TypeBadRequest},
				{"two objects", good + good, 400, httpapi.TypeBadRequest},
				{"two objects on two lines", good + "\n" + good + "\n", 400, httpapi.TypeBadRequest},
				{"a form body", ep.field + "=" + value, 400, httpapi.TypeBadRequest},
				{"whitespace only", " \n\t ", 400, httpapi.TypeBadRequest},
				{"a truncated object", "{" + f + ":" + v, 400, httpapi.TypeBadRequest},
				{"a truncated string", "{" + f + `:"` + value, 400, httpapi.TypeBadRequest},
				{"an array", "[" + good + "]", 400, httpapi.TypeBadRequest},
				{"a string", v, 400, httpapi.TypeBadRequest},
				{"a number", "5", 400, httpapi.TypeBadRequest},
				{"true", "true", 400, httpapi.TypeBadRequest},
				{"null", "null", 400, httpapi.TypeBadRequest},
				{"the field twice", "{" + f + ":" + v + "," + f + ":" + v + "}", 400, httpapi.TypeBadRequest},
				// Names match exactly, as the schemas' additionalProperties:
				// false says; encoding/json alone would take these.
				{"the field in upper case", "{" + jsonString(strings.ToUpper(ep.field)) + ":" + v + "}", 400, httpapi.TypeBadRequest},
				{"the field capitalised", "{" + jsonString(strings.ToUpper(ep.field[:1])+ep.field[1:]) + ":" + v + "}", 400, httpapi.TypeBadRequest},
				{"the field twice in two cases", "{" + f + ":" + v + "," + strings.ToUpper(f) + ":" + v + "}", 400, httpapi.TypeBadRequest},
				{"a number for the field", "{" + f + ":5}", 400, httpapi.TypeBadRequest},
				{"a boolean for the field", "{" + f + ":true}", 400, httpapi.TypeBadRequest},
				{"an array for the field", "{" + f + ":[" + v + "]}", 400, httpapi.TypeBadRequest},
				{"an object for the field", "{" + f + ":{}}", 400, httpapi.TypeBadRequest},
				{"single quotes", "{'" + ep.field + "':'" + value + "'}", 400, httpapi.TypeBadRequest},
				{"a comment", "/* hi */" + good, 400, httpapi.TypeBadRequest},
				{"a byte-order mark", "\ufeff" + good, 400, httpapi.TypeBadRequest},
				{"a bad escape", "{" + f + `:"\x"}`, 400, httpapi.TypeBadRequest},
				{"a body over 4 KiB inside the value", padded, 413, httpapi.TypeBodyTooLarge},
				{"a body over 4 KiB after the object", good + strings.Repeat(" ", maxBody), 413, httpapi.TypeBodyTooLarge},
				{"a body far over 4 KiB", "{" + f + ":" + jsonString(strings.Repeat("x", 64<<10)) + "}", 413, httpapi.TypeBodyTooLarge},
			}
			for _, c := range bad {
				before := e.snapshot(t)
				r := e.send(t, request{method: http.MethodPost, path: ep.path, token: token, body: c.body})
				wantProblem(t, ep.path+" with "+c.what, r, c.status, c.typ)
				e.unchanged(t, ep.path+" with "+c.what, before)
			}

			// An empty body, with and without a Content-Type.
			for what, h := range map[string]map[string]string{
				"an empty body":                     {"Content-Type": "application/json"},
				"an empty body and no Content-Type": nil,
			} {
				before := e.snapshot(t)
				r := e.send(t, request{method: http.MethodPost, path: ep.path, token: token, header: h})
				wantProblem(t, ep.path+" with "+what, r, 400, httpapi.TypeBadRequest)
				e.unchanged(t, ep.path+" with "+what, before)
			}

			// The right body with the wrong Content-Type.
			for _, ct := range []string{
				"text/plain",
				"application/x-www-form-urlencoded",
				"multipart/form-data; boundary=x",
				"text/json",
				"application/problem+json",
				"application/json-patch+json",
				"json",
				"application/json; charset", // malformed parameter
			} {
				before := e.snapshot(t)
				r := e.send(t, request{method: http.MethodPost, path: ep.path, token: token, body: good,
					header: map[string]string{"Content-Type": ct}})
				wantProblem(t, ep.path+" as "+ct, r, http.StatusUnsupportedMediaType, httpapi.TypeUnsupportedMediaType)
				e.unchanged(t, ep.path+" as "+ct, before)
			}

			// The right body behind a query string that does not parse.
			for _, q := range malformedQueries {
				before := e.snapshot(t)
				r := e.send(t, request{method: http.MethodPost, path: ep.path + q, token: token, body: good})
				wantProblem(t, ep.path+q, r, 400, httpapi.TypeBadRequest)
				e.unchanged(t, ep.path+q, before)
			}

			// The body that all of the above spoiled works.
			r := e.send(t, request{method: http.MethodPost, path: ep.path, token: token, body: good,
				header: map[string]string{"Content-Type": "Application/JSON; charset=utf-8"}})
			wantStatus(t, ep.path+" with a good body", r, ep.success)
		})
	}
}

// testBodyLimitBoundary: a body of exactly 4 KiB is read; one byte more is
// refused with 413.
func testBodyLimitBoundary(t *testing.T) {
	t.Parallel()
	e := setup(t)
	good := emailBody("ada@example.com")
	exact := good + strings.Repeat(" ", maxBody-len(good))
	before := e.snapshot(t)
	r := e.post(t, "/v1/sign-in-links", "", exact+" ")
	wantProblem(t, "a body of 4 KiB + 1", r, http.StatusRequestEntityTooLarge, httpapi.TypeBodyTooLarge)
	e.unchanged(t, "a body of 4 KiB + 1", before)

	r = e.post(t, "/v1/sign-in-links", "", exact)
	wantStatus(t, "a body of exactly 4 KiB", r, http.StatusAccepted)
	e.oneMail(t, mail.TopicLoginLink, "ada@example.com", "/sign-in")

	// Without a Content-Type the body is taken as JSON.
	r = e.send(t, request{method: http.MethodPost, path: "/v1/sign-in-links", body: emailBody("bob@example.com"), noContentType: true})
	wantStatus(t, "a body without Content-Type", r, http.StatusAccepted)
	e.oneMail(t, mail.TopicLoginLink, "bob@example.com", "/sign-in")
}

// testEmailChangeChecksTokenFirst: without a token, the endpoint answers 401
// whatever the body.
func testEmailChangeChecksTokenFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	before := e.snapshot(t)
	for _, body := range []string{"", "nonsense", newEmailBody("new@example.com"), strings.Repeat("x", 2*maxBody)} {
		wantUnauthenticated(t, "email change without a token", e.post(t, "/v1/me/email-change", "", body))
	}
	e.unchanged(t, "email change without a token", before)
}
