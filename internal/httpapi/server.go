package httpapi

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/eventsourced/accounts/internal/user"
)

// Users is what the API needs of the user domain; *user.Service has it.
type Users interface {
	RequestSignInLink(ctx context.Context, email string) error
	SignIn(ctx context.Context, code string) (user.Session, error)
	Me(ctx context.Context, token string) (user.User, error)
	SignOut(ctx context.Context, token string) error
	DeleteAccount(ctx context.Context, token string) error
	RequestEmailChange(ctx context.Context, token, newEmail string) error
	ConfirmEmailChange(ctx context.Context, code, token string) (user.User, error)
	UndoEmailChange(ctx context.Context, code string) (user.User, error)
	Sessions(ctx context.Context, token string) ([]user.SessionInfo, error)
	EndSession(ctx context.Context, token string, id uuid.UUID) error
	EndOtherSessions(ctx context.Context, token string) (int, error)
	// SignInAddress and EmailChangeOf tell what a code would do, and use
	// nothing up, for the pages the mailed links open.
	SignInAddress(ctx context.Context, code string) (string, error)
	EmailChangeOf(ctx context.Context, code string) (from, to string, err error)
	// UndoEmailAddress tells the address an undo code would move its
	// account back to, and uses nothing up.
	UndoEmailAddress(ctx context.Context, code string) (string, error)
}

// Deps are what [NewServer] serves.
type Deps struct {
	Users Users
	// Activity serves GET /v1/me/activity; nil leaves the route out.
	Activity ActivityReader
	// Orgs serves the organizations: the routes under /v1/orgs and
	// /v1/invitations, the pages /orgs/{id} and /invitations, and the
	// account page's list of them; nil leaves them all out.
	Orgs Orgs
	// Ready reports whether the service can serve: the database answers.
	// [ErrStopping] says that the service has begun to stop.
	Ready func(ctx context.Context) error
	// Metrics serves /metrics in the Prometheus text format; nil leaves
	// the route out, for a service whose metrics an admin listener serves.
	Metrics http.Handler
	Log     *slog.Logger
	// RateLimit is how many requests one client address may make a minute,
	// to every route together (a path of no route too) but the probes,
	// /healthz and /readyz; 0 turns the limit off.
	RateLimit int
	// TrustedProxies are the proxies in front of the service, whose
	// X-Forwarded-For names the client the limit counts; from any other
	// peer the header is ignored.
	TrustedProxies []netip.Prefix
	// Now tells the time to the rate limiter, to the session cookie's
	// Max-Age and to the key of the log's client names, which it replaces
	// each day; nil means time.Now.
	Now func() time.Time
	// BaseURL is the address the mailed links point at (BASE_URL). Under
	// https every answer carries Strict-Transport-Security, the pages'
	// session cookie is Secure, and its origin is trusted for the pages'
	// forms; "" is plain http.
	BaseURL string
	// Meter records the requests (http.server.requests and
	// http.server.request.duration, by route and status); nil records
	// nothing.
	Meter metric.Meter
	// TracerProvider makes a span of each request, named for its route;
	// nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	baseURL *url.URL
}

// NewServer returns the API's handler.
func NewServer(d Deps) http.Handler {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Meter == nil {
		d.Meter = noop.NewMeterProvider().Meter("")
	}
	if d.BaseURL != "" {
		u, err := url.Parse(d.BaseURL)
		if err != nil || u.Host == "" {
			d.Log.Error("httpapi: BASE_URL is no absolute URL; the pages take it for plain http", "base_url", d.BaseURL)
		} else {
			d.baseURL = u
		}
	}
	m, err := newRequestMetrics(d.Meter)
	if err != nil {
		d.Log.Error("httpapi: requests are not counted", "error", err)
		m, _ = newRequestMetrics(noop.NewMeterProvider().Meter(""))
	}
	clients := newClientNames(d.Now, d.TrustedProxies)
	var h http.Handler = nameSpans(addRoutes(http.NewServeMux(), d, nil))
	h = recoverPanics(d.Log, h)
	h = observer{log: d.Log, metrics: m, clients: clients}.observeRequests(h)
	h = traceRequests(d.TracerProvider, h)
	h = secureHeaders(d.baseURL, h)
	h = nameRequests(h)
	return h
}

// userJSON is a user as the API shows it.
type userJSON struct {
	ID        uuid.UUID  `json:"id"`
	Email     string     `json:"email"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
}

func toJSON(u user.User, withCreated bool) userJSON {
	j := userJSON{ID: u.ID, Email: u.Email}
	if withCreated {
		created := u.CreatedAt.UTC()
		j.CreatedAt = &created
	}
	return j
}
