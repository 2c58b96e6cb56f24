package org

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidName returns name trimmed of surrounding white space, or an error
// wrapping [ErrInvalidName] when it is not valid UTF-8, holds a control
// character, or is empty or longer than [MaxNameLength] characters
// (Unicode code points) once trimmed. Letters of any script are welcome.
func ValidName(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", fmt.Errorf("%w: not valid UTF-8", ErrInvalidName)
	}
	name = strings.TrimSpace(name)
	switch n := utf8.RuneCountInString(name); {
	case n == 0:
		return "", fmt.Errorf("%w: empty", ErrInvalidName)
	case n > MaxNameLength:
		return "", fmt.Errorf("%w: %d characters, at most %d", ErrInvalidName, n, MaxNameLength)
	}
	if strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("%w: holds a control character", ErrInvalidName)
	}
	return name, nil
}
