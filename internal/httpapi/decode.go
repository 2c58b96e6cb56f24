package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
)

// maxBody is the largest request body the API reads.
const maxBody = 4 << 10

// decodeError is a request body or query string the API refuses, with its
// problem.
type decodeError struct {
	status int
	typ    string
	detail string
}

func (e *decodeError) Error() string { return e.detail }

// decode reads the JSON body of r into v strictly: the content type must be
// JSON (or absent), the body at most maxBody bytes, one object (not null)
// whose names are exactly those of v's json tags, each at most once, with
// nothing after it. The error is a *decodeError.
//
// encoding/json matches names without regard to case (and by Unicode case
// folding), so {"EMAIL": ...} would fill Email; the schemas of the API
// allow the exact names alone, so decode checks each name first.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return &decodeError{http.StatusUnsupportedMediaType, TypeUnsupportedMediaType,
				fmt.Sprintf("Content-Type %q; send application/json", ct)}
		}
	}
	if err := declaredTooLarge(w, r, maxBody); err != nil {
		return err
	}
	body := http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return decodeFailure(err)
	}
	if raw[0] != '{' {
		return &decodeError{http.StatusBadRequest, TypeBadRequest, "the body must be a JSON object"}
	}
	if err := checkFields(raw, v); err != nil {
		return err
	}
	// checkFields has refused every name that is not one of v's.
	if err := json.Unmarshal(raw, v); err != nil {
		return decodeFailure(err)
	}
	if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return decodeFailure(err)
		}
		return &decodeError{http.StatusBadRequest, TypeBadRequest, "the body has data after its JSON object"}
	}
	return nil
}

// declaredTooLarge refuses, before reading any of it, a body whose
// Content-Length is over limit, and closes the connection after the
// answer: net/http would otherwise read what is left of a body under 256
// KiB before answering, and wait for the read timeout when the client
// sends less than it declared.
func declaredTooLarge(w http.ResponseWriter, r *http.Request, limit int64) *decodeError {
	if r.ContentLength <= limit {
		return nil
	}
	w.Header().Set("Connection", "close")
	return decodeFailure(&http.MaxBytesError{Limit: limit})
}

// checkFields refuses a name of the JSON object raw that is not the json
// tag of a field of the struct v points to, spelt exactly, or that raw
// holds twice, so that {"email":a,"email":b} cannot slip a second value
// past a reader of the first. Malformed JSON is left to the decoder.
func checkFields(raw json.RawMessage, v any) *decodeError {
	known := fieldNames(reflect.TypeOf(v).Elem())
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // The opening brace.
		return nil
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		name, _ := tok.(string)
		switch {
		case !known[name]:
			return &decodeError{http.StatusBadRequest, TypeBadRequest,
				fmt.Sprintf("unknown field %q; the fields are %s", name, strings.Join(slices.Sorted(maps.Keys(known)), ", "))}
		case seen[name]:
			return &decodeError{http.StatusBadRequest, TypeBadRequest,
				fmt.Sprintf("field %q is given more than once", name)}
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil
		}
	}
	return nil
}

// fieldNames returns the JSON names of the struct type t: the name of each
// exported field's json tag. Every request type of the API tags each of its
// fields.
func fieldNames(t reflect.Type) map[string]bool {
	if names, ok := fieldNamesOf.Load(t); ok {
		return names.(map[string]bool)
	}
	names := map[string]bool{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.IsExported() && name != "" && name != "-" {
			names[name] = true
		}
	}
	fieldNamesOf.Store(t, names)
	return names
}

// fieldNamesOf holds what fieldNames found for each type it was given: a
// map that is never written after it is stored.
var fieldNamesOf sync.Map

func decodeFailure(err error) *decodeError {
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	var netErr net.Error
	switch {
	case errors.As(err, &tooLarge):
		return &decodeError{http.StatusRequestEntityTooLarge, TypeBodyTooLarge,
			fmt.Sprintf("the body is larger than %d bytes", tooLarge.Limit)}
	case errors.Is(err, io.EOF):
		return &decodeError{http.StatusBadRequest, TypeBadRequest, "the body is empty; send a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &decodeError{http.StatusBadRequest, TypeBadRequest, "the body ends inside its JSON"}
	case errors.As(err, &syntax):
		return &decodeError{http.StatusBadRequest, TypeBadRequest, fmt.Sprintf("the body is not JSON: %v", err)}
	case errors.As(err, &typeErr):
		return &decodeError{http.StatusBadRequest, TypeBadRequest,
			fmt.Sprintf("field %q must be a JSON %s", typeErr.Field, typeErr.Type)}
	case errors.As(err, &netErr):
		// The connection's error names the server's address and the
		// client's: say what happened instead.
		if netErr.Timeout() {
			return &decodeError{http.StatusBadRequest, TypeBadRequest, "the body did not arrive in time"}
		}
		return &decodeError{http.StatusBadRequest, TypeBadRequest, "the body could not be read"}
	default:
		// Other refusals of encoding/json; unknown names never get here,
		// since checkFields refuses them first.
		return &decodeError{http.StatusBadRequest, TypeBadRequest, err.Error()}
	}
}
