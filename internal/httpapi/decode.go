package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
)

// maxBody is the largest request body the API reads.
const maxBody = 4 << 10

// decodeError is a request body the API refuses, with its problem.
type decodeError struct {
	status int
	typ    string
	detail string
}

func (e *decodeError) Error() string { return e.detail }

// decode reads the JSON body of r into v strictly: the content type must be
// JSON (or absent), the body at most maxBody bytes, one object (not null)
// with no unknown fields and nothing after it. Field names match without
// regard to case, as encoding/json does. The error is a *decodeError.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != "application/json" {
			return &decodeError{http.StatusUnsupportedMediaType, TypeUnsupportedMediaType,
				fmt.Sprintf("Content-Type %q; send application/json", ct)}
		}
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
	if name, ok := repeatedField(raw); ok {
		return &decodeError{http.StatusBadRequest, TypeBadRequest,
			fmt.Sprintf("field %q is given more than once", name)}
	}
	fields := json.NewDecoder(bytes.NewReader(raw))
	fields.DisallowUnknownFields()
	if err := fields.Decode(v); err != nil {
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

// repeatedField returns a field name that the JSON object raw holds twice,
// compared without regard to case as encoding/json matches names, so that
// {"email":a,"EMAIL":b} cannot slip a second value past a reader of the first.
func repeatedField(raw json.RawMessage) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.Token(); err != nil { // The opening brace.
		return "", false
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		name, _ := tok.(string)
		if key := strings.ToLower(name); seen[key] {
			return name, true
		} else {
			seen[key] = true
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return "", false
		}
	}
	return "", false
}

func decodeFailure(err error) *decodeError {
	var tooLarge *http.MaxBytesError
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
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
	default:
		// Unknown fields and other refusals of encoding/json.
		return &decodeError{http.StatusBadRequest, TypeBadRequest, err.Error()}
	}
}
