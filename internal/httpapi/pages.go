package httpapi

import (
	_ "embed"
	"html/template"
	"net/http"
)

// The pages the mailed links open when BASE_URL points at this service, as
// it does by default. Opening a link changes nothing: a mail scanner that
// follows every link must not use up the code. The person presses a button,
// and the page's script sends the code to the API.

//go:embed pages.js
var pagesJS []byte

var page = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem}
input{font:inherit;width:100%;box-sizing:border-box}button{font:inherit;margin-top:1rem}
pre{white-space:pre-wrap;word-break:break-all;background:#f4f4f4;padding:.5rem}</style>
<h1>{{.Title}}</h1>
<form id="use-code" data-endpoint="{{.Endpoint}}">
<label for="code">Code</label>
<input id="code" name="code" value="{{.Code}}" autocomplete="one-time-code" spellcheck="false" required>
<button type="submit">{{.Action}}</button>
</form>
<p id="result" role="status"></p>
<pre id="detail" hidden></pre>
<script src="/assets/pages.js"></script>
</html>
`))

type pageData struct {
	Title, Action, Endpoint, Code string
}

// handlePage serves one link page with the code from the link filled in.
func handlePage(title, action, endpoint string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		pageHeaders(w)
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = page.Execute(w, pageData{Title: title, Action: action, Endpoint: endpoint, Code: r.URL.Query().Get("code")})
	}
}

func handlePagesJS(w http.ResponseWriter, _ *http.Request) {
	pageHeaders(w)
	w.Header().Set("Content-Type", "text/javascript; charset=utf-8")
	_, _ = w.Write(pagesJS)
}

// pageHeaders keep the code in the page's address to this service: no
// referrer, no framing, no scripts or connections but its own.
func pageHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'unsafe-inline'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
}
