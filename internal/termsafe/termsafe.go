// Package termsafe says which characters of server-supplied text a terminal
// would act on rather than show, and escapes them in JSON.
//
// Query texts, application names and lease owners come from other
// sessions. encoding/json escapes only C0 controls (and <, >, &, U+2028,
// U+2029), so DEL, C1 controls (U+009B is CSI on many terminals: an
// escape sequence in one character) and bidi overrides (which reorder what
// follows them on the line) pass through raw and reach the terminal of
// whoever prints the document. EscapeJSON writes them as \u escapes: the
// JSON decodes to the same strings.
package termsafe

import (
	"fmt"
	"unicode/utf8"
)

// Control reports whether a terminal acts on r instead of showing it: C0
// controls, DEL, C1 controls, and the characters that change the direction
// of the text after them (U+061C, U+200E, U+200F, U+202A-U+202E,
// U+2066-U+2069).
func Control(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r < 0xa0) ||
		r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// EscapeJSON returns JSON text b with every Control character written as
// a \u escape. b must be valid JSON from encoding/json: outside strings it
// is ASCII without controls, so only string contents change. b is returned
// as it is when there is nothing to escape.
func EscapeJSON(b []byte) []byte {
	i := 0
	for i < len(b) && b[i] < utf8.RuneSelf && b[i] != 0x7f {
		i++
	}
	if i == len(b) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, n := utf8.DecodeRune(b[i:])
		if r >= 0x20 && Control(r) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
