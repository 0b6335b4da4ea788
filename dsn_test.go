package main

import "testing"

func TestResolveDSN(t *testing.T) {
	for _, v := range append([]string{"DATABASE_URL"}, pgEnv...) {
		t.Setenv(v, "")
	}
	if d, given := resolveDSN(""); given || d != "" {
		t.Errorf("nothing set: %q, %v", d, given)
	}
	if d, given := resolveDSN("postgres:///x"); !given || d != "postgres:///x" {
		t.Errorf("flag: %q, %v", d, given)
	}
	t.Setenv("PGHOST", "/tmp")
	if d, given := resolveDSN(""); !given || d != "" {
		t.Errorf("PGHOST: %q, %v", d, given)
	}
	t.Setenv("DATABASE_URL", "postgres:///y")
	if d, given := resolveDSN(""); !given || d != "postgres:///y" {
		t.Errorf("DATABASE_URL: %q, %v", d, given)
	}
	if d, _ := resolveDSN("postgres:///x"); d != "postgres:///x" {
		t.Errorf("the flag must win over DATABASE_URL: %q", d)
	}
}
