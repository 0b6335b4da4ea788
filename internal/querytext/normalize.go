package querytext

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Normalize replaces every literal in the SQL text q by a parameter $n,
// numbered after the highest parameter q already has, as
// pg_stat_statements does; it drops comments (they can carry data too) and
// keeps everything else as written. String constants of every form
// ('…', E'…', B'…', X'…', U&'…', $tag$…$tag$) and numbers are literals;
// quoted identifiers ("…") are not. A text cut off inside a literal or a
// comment (pg_stat_activity truncates long queries) ends with a parameter
// for the rest, so no part of the literal survives.
func Normalize(q string) string {
	n := maxParam(q)
	var b strings.Builder
	b.Grow(len(q))
	param := func() {
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				return strings.TrimRight(b.String(), " \t")
			}
			i += end // keep the newline
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			end := blockCommentEnd(q, i)
			if end < 0 {
				return strings.TrimRight(b.String(), " \t")
			}
			i = end
			// A comment separates tokens: keep them apart by one space.
			if b.Len() > 0 && isSpace(lastByte(&b)) {
				for i < len(q) && (q[i] == ' ' || q[i] == '\t') {
					i++
				}
			} else if b.Len() > 0 && i < len(q) && !isSpace(q[i]) {
				b.WriteByte(' ')
			}
		case c == '\'':
			i = quotedEnd(q, i+1, false)
			param()
		case (c == 'E' || c == 'e') && next(q, i) == '\'' && !identBefore(q, i):
			i = quotedEnd(q, i+2, true)
			param()
		case (c == 'B' || c == 'b' || c == 'X' || c == 'x' || c == 'N' || c == 'n') && next(q, i) == '\'' && !identBefore(q, i):
			i = quotedEnd(q, i+2, false)
			param()
		case (c == 'U' || c == 'u') && strings.HasPrefix(q[i+1:], "&'") && !identBefore(q, i):
			i = quotedEnd(q, i+3, false)
			param()
		case c == '"':
			end := quotedIdentEnd(q, i+1)
			b.WriteString(q[i:end])
			i = end
		case c == '$':
			if end, ok := dollarQuoteEnd(q, i); ok {
				i = end
				param()
				continue
			}
			// $1, or $ inside an identifier: copy it and its digits.
			j := i + 1
			for j < len(q) && isDigit(q[j]) {
				j++
			}
			b.WriteString(q[i:j])
			i = j
		case isDigit(c) || (c == '.' && i+1 < len(q) && isDigit(q[i+1]) && (i == 0 || q[i-1] != '.')):
			if identBefore(q, i) {
				b.WriteByte(c)
				i++
				continue
			}
			i = numberEnd(q, i)
			param()
		case isIdentStart(q, i):
			j := identEnd(q, i)
			b.WriteString(q[i:j])
			i = j
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String()
}

func next(q string, i int) byte {
	if i+1 < len(q) {
		return q[i+1]
	}
	return 0
}

func lastByte(b *strings.Builder) byte {
	s := b.String()
	return s[len(s)-1]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isIdentStart reports whether an identifier or keyword starts at q[i].
func isIdentStart(q string, i int) bool {
	c := q[i]
	if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') {
		return true
	}
	if c >= utf8.RuneSelf {
		r, _ := utf8.DecodeRuneInString(q[i:])
		return unicode.IsLetter(r)
	}
	return false
}

// identEnd is where the identifier starting at q[i] ends: letters, digits,
// _ and $ (PostgreSQL allows $ after the first character).
func identEnd(q string, i int) int {
	for i < len(q) {
		c := q[i]
		switch {
		case c == '_' || c == '$' || isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
			i++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(q[i:])
			if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
				return i
			}
			i += size
		default:
			return i
		}
	}
	return i
}

// identBefore reports whether q[i] continues an identifier (t1, e'x' in
// "name'…" is not a prefix).
func identBefore(q string, i int) bool {
	if i == 0 {
		return false
	}
	c := q[i-1]
	return c == '_' || c == '$' || isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= utf8.RuneSelf
}

// quotedEnd is the index after the string constant whose body starts at
// q[i]: ” is a quote inside it, and with backslashes (E'…') so is \'.
// An unterminated string runs to the end of q.
func quotedEnd(q string, i int, backslashes bool) int {
	for i < len(q) {
		switch q[i] {
		case '\\':
			if backslashes {
				i += 2
				continue
			}
		case '\'':
			if i+1 < len(q) && q[i+1] == '\'' {
				i += 2
				continue
			}
			return i + 1
		}
		i++
	}
	return len(q)
}

// quotedIdentEnd is the index after the quoted identifier whose body
// starts at q[i] ("" is a quote inside it).
func quotedIdentEnd(q string, i int) int {
	for i < len(q) {
		if q[i] == '"' {
			if i+1 < len(q) && q[i+1] == '"' {
				i += 2
				continue
			}
			return i + 1
		}
		i++
	}
	return len(q)
}

// dollarQuoteEnd reports whether a dollar-quoted string ($$…$$ or
// $tag$…$tag$) starts at q[i], and the index after it (the end of q when
// it is not closed).
func dollarQuoteEnd(q string, i int) (int, bool) {
	j := i + 1
	if j < len(q) && q[j] != '$' {
		if !isIdentStart(q, j) {
			return 0, false
		}
		for j < len(q) && q[j] != '$' {
			c := q[j]
			if !(c == '_' || isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= utf8.RuneSelf) {
				return 0, false
			}
			j++
		}
	}
	if j >= len(q) {
		return 0, false
	}
	tag := q[i : j+1]
	end := strings.Index(q[j+1:], tag)
	if end < 0 {
		return len(q), true
	}
	return j + 1 + end + len(tag), true
}

// blockCommentEnd is the index after the /* … */ comment at q[i]
// (comments nest in PostgreSQL), or -1 when it is not closed.
func blockCommentEnd(q string, i int) int {
	depth := 0
	for i < len(q)-1 {
		switch {
		case q[i] == '/' && q[i+1] == '*':
			depth++
			i += 2
		case q[i] == '*' && q[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i
			}
		default:
			i++
		}
	}
	return -1
}

// numberEnd is the index after the numeric constant at q[i]: digits
// (with _ separators), a fraction, an exponent, or a 0x/0o/0b integer.
func numberEnd(q string, i int) int {
	if q[i] == '0' && i+1 < len(q) && strings.ContainsRune("xXoObB", rune(q[i+1])) {
		j := i + 2
		for j < len(q) && (isHex(q[j]) || q[j] == '_') {
			j++
		}
		return j
	}
	j := i
	for j < len(q) && (isDigit(q[j]) || q[j] == '_') {
		j++
	}
	if j < len(q) && q[j] == '.' && !(j+1 < len(q) && q[j+1] == '.') {
		j++
		for j < len(q) && (isDigit(q[j]) || q[j] == '_') {
			j++
		}
	}
	if j < len(q) && (q[j] == 'e' || q[j] == 'E') {
		k := j + 1
		if k < len(q) && (q[k] == '+' || q[k] == '-') {
			k++
		}
		if k < len(q) && isDigit(q[k]) {
			for k < len(q) && isDigit(q[k]) {
				k++
			}
			j = k
		}
	}
	return j
}

func isHex(c byte) bool { return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') }

// maxParam is the highest $n in q, 0 when none. It looks inside literals
// too: numbering past one of those costs nothing.
func maxParam(q string) int {
	max := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '$' || identBefore(q, i) {
			continue
		}
		j := i + 1
		for j < len(q) && isDigit(q[j]) {
			j++
		}
		if j > i+1 && j-i < 8 {
			if n, err := strconv.Atoi(q[i+1 : j]); err == nil && n > max {
				max = n
			}
		}
	}
	return max
}
