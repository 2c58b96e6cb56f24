package httpapi

import (
	_ "embed"
	"net/http"
)

// openAPI is the OpenAPI 3.1 document of the API, served at /openapi.json.
// TestOpenAPIDocumentsEveryRoute holds it to the routes declared here.
//
//go:embed openapi.json
var openAPI []byte

// addRoutes declares every route of the API in one place; declared, when
// not nil, hears each "METHOD /path" pattern.
func addRoutes(mux *http.ServeMux, d Deps, declared func(pattern string)) {
	if declared == nil {
		declared = func(string) {}
	}
	limit := limitClients(d.RateLimit, d.Now, d.TrustedProxies)
	v1 := func(method, path string, h http.HandlerFunc) {
		declared(method + " " + path)
		mux.Handle(method+" "+path, limit(h))
		allowed := method
		if method == http.MethodGet {
			allowed = "GET, HEAD"
		}
		mux.Handle(path, methodNotAllowed(allowed))
	}
	v1("POST", "/v1/sign-in-links", handleRequestSignInLink(d.Users, d.Log))
	v1("POST", "/v1/sessions", handleSignIn(d.Users, d.Log))
	v1("GET", "/v1/me", handleMe(d.Users, d.Log))
	v1("POST", "/v1/me/email-change", handleRequestEmailChange(d.Users, d.Log))
	v1("POST", "/v1/email-changes", handleConfirmEmailChange(d.Users, d.Log))
	v1("DELETE", "/v1/sessions/current", handleSignOut(d.Users, d.Log))
	if d.Activity != nil {
		v1("GET", "/v1/me/activity", handleActivity(d.Users, d.Activity, d.Log))
	}

	op := func(path string, h http.Handler) {
		declared("GET " + path)
		mux.Handle("GET "+path, h)
		mux.Handle(path, methodNotAllowed("GET, HEAD"))
	}
	op("/healthz", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	op("/readyz", handleReady(d.Ready, d.Log))
	op("/metrics", d.Metrics)
	op("/openapi.json", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	}))
	op("/sign-in", handlePage("Sign in", "Sign in", "/v1/sessions"))
	op("/confirm-email", handlePage("Confirm your new address", "Confirm", "/v1/email-changes"))
	op("/assets/pages.js", http.HandlerFunc(handlePagesJS))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, http.StatusNotFound, TypeNotFound, "no route for "+r.URL.Path)
	})
}

// methodNotAllowed answers any method on a path that only takes allowed.
func methodNotAllowed(allowed string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allowed)
		writeProblem(w, http.StatusMethodNotAllowed, TypeMethodNotAllowed,
			r.Method+" is not allowed; use "+allowed)
	})
}
