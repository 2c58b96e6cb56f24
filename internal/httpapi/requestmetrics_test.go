package httpapi_test

import (
	"net/http/httptest"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/eventsourced/accounts/internal/httpapi"
)

// Each request is counted under the mux pattern it matched, so that the
// series stay few: the method and path of a route, the path alone for a
// method the path does not take, the catch-all "/" for a path of no route,
// and "unmatched" for a request the mux refuses before matching (a
// request-target of "*").
func TestRequestMetricsRoute(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, method, target, route string }{
		{"ARoute", "POST", "/v1/sign-in-links", "POST /v1/sign-in-links"},
		{"AMethodThePathDoesNotTake", "PUT", "/v1/sign-in-links", "/v1/sign-in-links"},
		{"APathOfNoRoute", "GET", "/v1/no/such/" + strings.Repeat("x", 20), "/"},
		{"AnAsteriskTarget", "GET", "*", "unmatched"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(t.Context()) })
			h := httpapi.NewServer(httpapi.Deps{Users: fakeUsers{}, Meter: mp.Meter("test")})
			req := httptest.NewRequest(c.method, c.target, strings.NewReader(`{"email":"ada@example.com"}`))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(httptest.NewRecorder(), req)
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(t.Context(), &rm); err != nil {
				t.Fatal(err)
			}
			var routes []string
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					sum, ok := m.Data.(metricdata.Sum[int64])
					if m.Name != "http.server.requests" || !ok {
						continue
					}
					for _, dp := range sum.DataPoints {
						route, _ := dp.Attributes.Value("http.route")
						routes = append(routes, route.AsString())
					}
				}
			}
			if len(routes) != 1 || routes[0] != c.route {
				t.Errorf("%s %s: counted under http.route %q, want [%q]", c.method, c.target, routes, c.route)
			}
		})
	}
}
