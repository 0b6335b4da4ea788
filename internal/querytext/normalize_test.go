package querytext

import (
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"SELECT * FROM users WHERE email = 'a@b.c'", "SELECT * FROM users WHERE email = $1"},
		{"UPDATE t SET n = 42, f = 1.5e3 WHERE id = $1", "UPDATE t SET n = $2, f = $3 WHERE id = $1"},
		{"select 'it''s', E'a\\'b', x'1F', B'101', U&'d\\0061t'", "select $1, $2, $3, $4, $5"},
		{"SELECT $$secret$$, $tag$ also $$ secret $tag$", "SELECT $1, $2"},
		{`SELECT "col1", t1.c2 FROM "we""ird" t1`, `SELECT "col1", t1.c2 FROM "we""ird" t1`},
		{"SELECT 1 -- email a@b.c\nFROM t", "SELECT $1 \nFROM t"},
		{"SELECT /* user 'x' /* nested */ */ 2", "SELECT $1"},
		{"SELECT a FROM t WHERE b IN (1, 2, 3)", "SELECT a FROM t WHERE b IN ($1, $2, $3)"},
		{"SELECT -5, .5, 0x1F, 1_000", "SELECT -$1, $2, $3, $4"},
		{"SELECT pg_advisory_lock(1, 7)", "SELECT pg_advisory_lock($1, $2)"},
		{"SELECT x FROM t WHERE s = 'cut off by track_activity_query_si", "SELECT x FROM t WHERE s = $1"},
		{"SELECT $body$ never closed", "SELECT $1"},
		{"SELECT 1 /* never closed", "SELECT $1"},
		{"SELECT arr[1:2], 1..2", "SELECT arr[$1:$2], $3..$4"},
		{"SELECT café_1, 'été'", "SELECT café_1, $1"},
		{"", ""},
	} {
		if got := Normalize(tc.in); got != tc.want {
			t.Errorf("Normalize(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}

// FuzzNormalizeHidesLiterals checks the one promise that matters: no part of
// a string literal's body survives normalization, whatever surrounds it.
func FuzzNormalizeHidesLiterals(f *testing.F) {
	f.Add("SELECT * FROM t WHERE a = ", "secretvalue", " AND b = 1")
	f.Add("/* x */ SELECT ", "zzzsecretzzz", "")
	f.Add("SELECT E", "topsecret", "")
	f.Fuzz(func(t *testing.T, pre, secret, post string) {
		if len(secret) < 6 || strings.ContainsAny(secret, "'\\") || strings.ContainsAny(pre+post, "'\"$-/*") || strings.Contains(pre+post, secret) {
			return
		}
		q := pre + "'" + secret + "'" + post
		if got := Normalize(q); strings.Contains(got, secret) {
			t.Fatalf("Normalize(%q) = %q keeps the literal", q, got)
		}
	})
}

func TestMode(t *testing.T) {
	for i, name := range Modes {
		m, err := ParseMode(name)
		if err != nil || m != Mode(i) || m.String() != name {
			t.Errorf("ParseMode(%q) = %v, %v", name, m, err)
		}
	}
	if _, err := ParseMode("some"); err == nil || !strings.Contains(err.Error(), "full, normalized, none") {
		t.Errorf("ParseMode(some) = %v, want the choices named", err)
	}
	q := "SELECT 'x'"
	if Full.Apply(q) != q || Normalized.Apply(q) != "SELECT $1" || None.Apply(q) != "" {
		t.Error("Apply does not follow its mode")
	}
}
