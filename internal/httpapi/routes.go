package httpapi

import (
	_ "embed"
	"net/http"
	"strings"
	"time"
)

// openAPI is the OpenAPI 3.1 document of the API, served at /openapi.json.
// TestOpenAPIDocumentsEveryRoute holds it to the routes declared here.
//
//go:embed openapi.json
var openAPI []byte

// addRoutes declares every route of the API in one place, and returns mux
// behind the client limit; declared, when not nil, hears each
// "METHOD /path" pattern.
func addRoutes(mux *http.ServeMux, d Deps, declared func(pattern string)) http.Handler {
	if declared == nil {
		declared = func(string) {}
	}
	limiter := newClientLimiter(d.RateLimit, d.Now, d.TrustedProxies)
	// The methods of each path, for its 405 answer, registered once every
	// route of the path is.
	methods := map[string][]string{}
	var paths []string
	v1 := func(method, path string, h http.HandlerFunc) {
		declared(method + " " + path)
		mux.Handle(method+" "+path, wellFormedQuery(h, d.Log))
		if methods[path] == nil {
			paths = append(paths, path)
		}
		methods[path] = append(methods[path], method)
		if method == http.MethodGet {
			methods[path] = append(methods[path], http.MethodHead)
		}
	}
	v1("POST", "/v1/sign-in-links", handleRequestSignInLink(d.Users, d.Log))
	v1("POST", "/v1/sessions", handleSignIn(d.Users, d.Log))
	v1("GET", "/v1/me", handleMe(d.Users, d.Log))
	v1("POST", "/v1/me/email-change", handleRequestEmailChange(d.Users, d.Log))
	v1("POST", "/v1/email-changes", handleConfirmEmailChange(d.Users, d.Log))
	v1("POST", "/v1/email-changes/undo", handleUndoEmailChange(d.Users, d.Log))
	v1("DELETE", "/v1/sessions/current", handleSignOut(d.Users, d.Log))
	v1("GET", "/v1/me/sessions", handleSessions(d.Users, d.Log))
	v1("DELETE", "/v1/me/sessions", handleEndOtherSessions(d.Users, d.Log))
	v1("DELETE", "/v1/me/sessions/{id}", handleEndSession(d.Users, d.Log))
	v1("DELETE", "/v1/me", handleDeleteAccount(d.Users, d.Log))
	if d.Activity != nil {
		v1("GET", "/v1/me/activity", handleActivity(d.Users, d.Activity, d.Log))
	}
	if d.Orgs != nil {
		v1("POST", "/v1/orgs", handleCreateOrg(d.Orgs, d.Log))
		v1("GET", "/v1/orgs", handleListOrgs(d.Orgs, d.Log))
		v1("GET", "/v1/orgs/{id}", handleGetOrg(d.Orgs, d.Log))
		v1("DELETE", "/v1/orgs/{id}", handleDeleteOrg(d.Orgs, d.Log))
		v1("POST", "/v1/orgs/{id}/invitations", handleInvite(d.Orgs, d.Log))
		v1("GET", "/v1/orgs/{id}/invitations", handleInvitations(d.Orgs, d.Log))
		v1("DELETE", "/v1/orgs/{id}/invitations/{invitation_id}", handleRevoke(d.Orgs, d.Log))
		v1("PATCH", "/v1/orgs/{id}/members/{user_id}", handleChangeRole(d.Orgs, d.Log))
		v1("DELETE", "/v1/orgs/{id}/members/{user_id}", handleRemoveMember(d.Orgs, d.Log))
		v1("POST", "/v1/invitations", handleAccept(d.Orgs, d.Log))
		v1("POST", "/v1/invitations/offer", handleOffer(d.Orgs, d.Log))
	}
	for _, path := range paths {
		mux.Handle(path, methodNotAllowed(strings.Join(methods[path], ", ")))
	}

	op := func(path string, h http.Handler) {
		declared("GET " + path)
		mux.Handle("GET "+path, h)
		mux.Handle(path, methodNotAllowed("GET, HEAD"))
	}
	op("/healthz", Health())
	op("/readyz", Ready(d.Ready, d.Log))
	if d.Metrics != nil {
		op("/metrics", d.Metrics)
	}
	op("/openapi.json", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openAPI)
	}))

	// The browser pages: GET shows a page, POST sends its form. Every POST
	// is refused from other sites.
	site := &site{users: d.Users, activity: d.Activity, orgs: d.Orgs, log: d.Log,
		cookie: newSessionCookie(d.baseURL), invitation: newInvitationCookie(d.baseURL), now: d.Now}
	forms := http.NewCrossOriginProtection()
	if d.baseURL != nil {
		// Behind a proxy that rewrites Host, a browser that sends no
		// Sec-Fetch-Site is known by the Origin of BASE_URL.
		_ = forms.AddTrustedOrigin(d.baseURL.Scheme + "://" + d.baseURL.Host)
	}
	forms.SetDenyHandler(http.HandlerFunc(site.refuseCrossOrigin))
	// The patterns of the pages' paths, without a method, such as
	// "/orgs/{id}".
	pagePatterns := map[string]bool{}
	page := func(path string, show http.Handler, send http.HandlerFunc) {
		pattern, allowed := path, "GET, HEAD"
		if path == "/" {
			pattern = "/{$}"
		}
		pagePatterns[pattern] = true
		if show != nil {
			declared("GET " + path)
			mux.Handle("GET "+pattern, show)
		}
		if send != nil {
			declared("POST " + path)
			mux.Handle("POST "+pattern, forms.Handler(send))
			allowed += ", POST"
		}
		if show == nil {
			allowed = "POST"
		}
		mux.Handle(pattern, site.wrongMethod(allowed))
	}
	page("/", site.showHome(), site.askLink)
	page("/sign-in", site.showCode(signInPage), site.signIn)
	page("/confirm-email", site.showCode(confirmPage), site.confirmEmail)
	page("/undo-email", site.showCode(undoPage), site.undoEmail)
	page("/account", http.HandlerFunc(site.account), nil)
	page("/account/email", nil, site.changeEmail)
	page("/account/delete", nil, site.deleteAccount)
	page("/account/sessions/end", nil, site.endSession)
	page("/account/sessions/end-others", nil, site.endOtherSessions)
	page("/sign-out", nil, site.signOut)
	if d.Orgs != nil {
		page("/account/orgs", nil, site.createOrg)
		page("/orgs/{id}", http.HandlerFunc(site.showOrg), nil)
		page("/orgs/{id}/invite", nil, site.invite)
		page("/orgs/{id}/invitations/revoke", nil, site.revokeInvitation)
		page("/orgs/{id}/members/role", nil, site.changeRole)
		page("/orgs/{id}/members/remove", nil, site.removeMember)
		page("/orgs/{id}/leave", nil, site.leaveOrg)
		page("/orgs/{id}/delete", nil, site.deleteOrg)
		page("/invitations", http.HandlerFunc(site.showInvitation), site.acceptInvitation)
	}
	op("/assets/pages.js", serveAsset("pages.js", "text/javascript; charset=utf-8"))
	op("/assets/pages.css", serveAsset("pages.css", "text/css; charset=utf-8"))
	// Browsers ask for the icon on their own, and crawlers for robots.txt;
	// a 404 of either is an error in a browser's console.
	op("/favicon.ico", serveAsset("favicon.ico", "image/x-icon"))
	op("/robots.txt", serveAsset("robots.txt", "text/plain; charset=utf-8"))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// A browser that strays from the pages gets a page; the API and
		// its clients get a problem.
		if strayBrowser(r) {
			site.notFound(w, r)
			return
		}
		writeProblem(w, r, http.StatusNotFound, TypeNotFound, "no route for "+r.URL.Path)
	})

	// Every request counts against its client's limit, whatever it asks
	// for, a path of no route too, but the probes, which load balancers
	// ask for from one address all day. Over the limit a page's path
	// answers a page, and a browser that strays one too; the rest get a
	// problem.
	probe := func(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/readyz" }
	return limiter.limit(mux, probe, func(w http.ResponseWriter, r *http.Request, wait time.Duration) {
		// The log, the metrics and the span name the route refused.
		_, r.Pattern = mux.Handler(r)
		_, pattern, ok := strings.Cut(r.Pattern, " ")
		if !ok {
			pattern = r.Pattern // A pattern of any method, such as a page's 405.
		}
		if pagePatterns[pattern] || strayBrowser(r) {
			site.refuseTooMany(w, r, wait)
			return
		}
		writeTooMany(w, r, wait, "this client sent too many requests")
	})
}

// strayBrowser reports whether r is a browser's request outside the API
// (it accepts text/html), which gets a page where the API's clients get a
// problem.
func strayBrowser(r *http.Request) bool {
	return !strings.HasPrefix(r.URL.Path, "/v1/") && strings.Contains(r.Header.Get("Accept"), "text/html")
}

// methodNotAllowed answers any method on a path that only takes allowed.
func methodNotAllowed(allowed string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allowed)
		writeProblem(w, r, http.StatusMethodNotAllowed, TypeMethodNotAllowed,
			r.Method+" is not allowed; use "+allowed)
	})
}
