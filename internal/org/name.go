package org

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ValidName returns name trimmed of surrounding white space, or an error
// wrapping [ErrInvalidName] when it is not valid UTF-8, is empty or
// longer than [MaxNameLength] characters (Unicode code points) once
// trimmed, shows nothing (only spaces and invisible characters), or
// holds a character that could break a line or make the text around it
// read otherwise: a control, a line or paragraph separator, or an
// invisible format character such as a bidirectional override or a
// zero-width space. Letters of any script are welcome, and the
// zero-width joiner and non-joiner, which emoji and some scripts need.
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
	if i := strings.IndexFunc(name, hidden); i >= 0 {
		r, _ := utf8.DecodeRuneInString(name[i:])
		return "", fmt.Errorf("%w: holds the invisible character %U", ErrInvalidName, r)
	}
	if strings.IndexFunc(name, visible) < 0 {
		return "", fmt.Errorf("%w: shows nothing", ErrInvalidName)
	}
	return name, nil
}

// hidden reports a line or paragraph separator, or an invisible format
// character but the zero-width joiner and non-joiner.
func hidden(r rune) bool {
	if r == '\u200c' || r == '\u200d' {
		return false
	}
	return unicode.In(r, unicode.Zl, unicode.Zp, unicode.Cf)
}

// visible reports a character that shows: neither a space nor invisible.
func visible(r rune) bool { return unicode.IsGraphic(r) && !unicode.IsSpace(r) }
