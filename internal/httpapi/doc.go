// Package httpapi is the service's HTTP side: the JSON API under /v1/, the
// probes and /metrics (unless an admin listener serves it), and the
// browser pages beside it (pages.go), plain HTML forms over the same
// commands. [NewServer] takes what it serves as
// [Deps] and returns one http.Handler; every route is declared in
// routes.go.
//
// What a client can rely on:
//
//   - Every error is application/problem+json ([Problem]) with a stable
//     type per kind of error; a database that cannot be reached or is busy
//     answers 503 with Retry-After, never 500.
//   - Bodies are at most 4 KiB and decoded strictly: one JSON object, no
//     unknown fields, nothing after it. Bad input changes nothing.
//   - Each client address is limited to [Deps.RateLimit] requests a minute,
//     to any path but the probes; X-Forwarded-For counts only from
//     [Deps.TrustedProxies].
//   - Every answer carries X-Content-Type-Options: nosniff, and under an
//     https [Deps.BaseURL] Strict-Transport-Security.
//   - A GET never uses a code up; the pages' forms refuse cross-site posts.
//   - No log line keeps a query string, where a page's code travels, nor
//     the client's address: the request's line names the client by a keyed
//     hash whose key changes each day, and clips the method and path.
//
// docs/api.md describes every route.
package httpapi
