package httpapi

import (
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
