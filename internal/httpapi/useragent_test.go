package httpapi_test

import (
	"testing"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// TestDescribeClient: a session's client is a browser or program and its
// system, in a few plain words, or nothing; never what else the header
// says.
func TestDescribeClient(t *testing.T) {
	t.Parallel()
	for header, want := range map[string]string{
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0":                                                                  "Firefox on Linux",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0":           "Edge on Windows",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1": "Safari on iOS",
		"curl/8.5.0":                "curl",
		"":                          "",
		"<script>alert(1)</script>": "",
	} {
		if got := httpapi.DescribeClient(header); got != want {
			t.Errorf("DescribeClient(%q) = %q, want %q", header, got, want)
		}
	}
}
