package httpapi

import (
	"log/slog"
	"net/http"
	"net/url"
)

// query returns the parameters of r's query string, or a *decodeError (400)
// when the string cannot be parsed. r.URL.Query would drop the pairs it
// cannot parse and answer as if they had not been sent.
func query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &decodeError{http.StatusBadRequest, TypeBadRequest,
			"the query string cannot be parsed: " + err.Error()}
	}
	return q, nil
}

// badQuery is the 400 of a query parameter that a route refuses; detail
// says which and why.
func badQuery(detail string) error {
	return &decodeError{http.StatusBadRequest, TypeBadRequest, detail}
}

// wellFormedQuery refuses, as [query] does, a request whose query string
// cannot be parsed, before h sees it: a route that reads no parameter
// would otherwise act on a request that its client built wrongly.
func wellFormedQuery(h http.HandlerFunc, log *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, err := query(r); err != nil {
			writeError(w, r, log, err, 0)
			return
		}
		h(w, r)
	}
}
