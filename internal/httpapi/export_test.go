package httpapi

import (
	"net/http"
	"strings"
)

// Route is one method and path the API serves.
type Route struct{ Method, Path string }

// Routes returns every route the API serves, the activity's and the
// organizations' included, from the declarations of addRoutes.
func Routes() []Route {
	var routes []Route
	mux := http.NewServeMux()
	addRoutes(mux, Deps{Activity: routesOnly{}, Orgs: orgsOnly{}, Metrics: http.NotFoundHandler()}, func(pattern string) {
		method, path, _ := strings.Cut(pattern, " ")
		routes = append(routes, Route{Method: method, Path: path})
	})
	return routes
}

// routesOnly stands for an activity reader when only the routes are listed.
type routesOnly struct{ ActivityReader }

// orgsOnly stands for the organizations when only the routes are listed.
type orgsOnly struct{ Orgs }

// DescribeClient is describeClient, for its table test.
var DescribeClient = describeClient

// DescribeActivity is describeActivity, for its table test.
var DescribeActivity = describeActivity
