package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/eventsourced/accounts/internal/httpapi"
	"github.com/eventsourced/accounts/internal/user"
)

// countingUsers counts the commands that would use a code.
type countingUsers struct {
	fakeUsers
	used *atomic.Int32
}

func (c countingUsers) SignIn(ctx context.Context, code string) (user.Session, error) {
	c.used.Add(1)
	return c.fakeUsers.SignIn(ctx, code)
}

func (c countingUsers) ConfirmEmailChange(ctx context.Context, code string) (user.User, error) {
	c.used.Add(1)
	return c.fakeUsers.ConfirmEmailChange(ctx, code)
}

// The mailed links open pages that show the code and use it only when the
// person presses the button, so a mail scanner that follows links cannot
// spend it; the pages keep the code to themselves.
func TestLinkPagesShowTheCodeAndUseNothing(t *testing.T) {
	t.Parallel()
	var used atomic.Int32
	h := httpapi.NewServer(httpapi.Deps{Users: countingUsers{used: &used}})
	for path, endpoint := range map[string]string{"/sign-in": "/v1/sessions", "/confirm-email": "/v1/email-changes"} {
		r := serve(t, h, "GET", path+`?code=abc%22%3E%3Cscript%3Ex()%3C/script%3E`, "", nil, nil)
		if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET %s: %d %s", path, r.status, r.header.Get("Content-Type"))
		}
		body := string(r.body)
		if strings.Contains(body, "<script>x()") || !strings.Contains(body, `value="abc&#34;&gt;&lt;script&gt;x()&lt;/script&gt;"`) {
			t.Errorf("GET %s: the code is not escaped into the field:\n%s", path, body)
		}
		if !strings.Contains(body, `data-endpoint="`+endpoint+`"`) || !strings.Contains(body, `<script src="/assets/pages.js"></script>`) {
			t.Errorf("GET %s: the page does not post to %s with its script:\n%s", path, endpoint, body)
		}
		for header, want := range map[string]string{
			"Referrer-Policy":         "no-referrer",
			"Content-Security-Policy": "script-src 'self'",
			"Cache-Control":           "no-store",
		} {
			if !strings.Contains(r.header.Get(header), want) {
				t.Errorf("GET %s: %s = %q, want %q in it", path, header, r.header.Get(header), want)
			}
		}
		wantProblem(t, "POST "+path, serve(t, h, "POST", path, "", nil, nil), http.StatusMethodNotAllowed, httpapi.TypeMethodNotAllowed)
	}
	if n := used.Load(); n != 0 {
		t.Errorf("opening the pages used a code %d times, want never", n)
	}
	js := serve(t, h, "GET", "/assets/pages.js", "", nil, nil)
	if js.status != http.StatusOK || !strings.HasPrefix(js.header.Get("Content-Type"), "text/javascript") ||
		!strings.Contains(string(js.body), "fetch(form.dataset.endpoint") {
		t.Errorf("GET /assets/pages.js: %d %s", js.status, js.header.Get("Content-Type"))
	}
}
