package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/eventsourced/accounts/internal/eventstore"
	"github.com/eventsourced/accounts/internal/httpapi"
)

// contended is a domain whose commands keep losing their races.
type contended struct{ fakeUsers }

func (contended) SignOut(context.Context, string) error {
	return fmt.Errorf("user: gave up after 8 concurrent changes: %w", eventstore.ErrConcurrency)
}

func (c contended) DeleteAccount(ctx context.Context, token string) error {
	return c.SignOut(ctx, token)
}

// TestContentionIsBusyNotInternal: a command that lost its race too often
// changed nothing and may be sent again, which a 503 with Retry-After says.
func TestContentionIsBusyNotInternal(t *testing.T) {
	t.Parallel()
	h := httpapi.NewServer(httpapi.Deps{Users: contended{}})
	r := serve(t, h, "DELETE", "/v1/sessions/current", "", map[string]string{"Authorization": "Bearer " + fakeToken}, nil)
	wantProblem(t, "a contended sign-out", r, http.StatusServiceUnavailable, httpapi.TypeBusy)
	if wait := wantRetryAfter(t, "a contended sign-out", r); wait != time.Second {
		t.Errorf("Retry-After %s, want 1s", wait)
	}
}
