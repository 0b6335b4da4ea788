package cli

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// resolveArgs parses args as a connecting command does and resolves them.
func resolveArgs(t *testing.T, args ...string) (string, bool, error) {
	t.Helper()
	fs := newFlagSet("snapshot")
	conn := addConnFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return "", false, err
	}
	dsn, given := conn.resolve()
	return dsn, given, nil
}

func TestResolveDSN(t *testing.T) {
	for _, v := range append([]string{"DATABASE_URL"}, pgEnv...) {
		t.Setenv(v, "")
	}
	if d, given, _ := resolveArgs(t); given || d != "" {
		t.Errorf("nothing set: %q, %v", d, given)
	}
	if d, given, _ := resolveArgs(t, "--dsn", "postgres:///x"); !given || d != "postgres:///x" {
		t.Errorf("flag: %q, %v", d, given)
	}
	t.Setenv("PGHOST", "/tmp")
	if d, given, _ := resolveArgs(t); !given || d != "" {
		t.Errorf("PGHOST: %q, %v", d, given)
	}
	t.Setenv("DATABASE_URL", "postgres:///y")
	if d, given, _ := resolveArgs(t); !given || d != "postgres:///y" {
		t.Errorf("DATABASE_URL: %q, %v", d, given)
	}
	if d, _, _ := resolveArgs(t, "postgres:///x"); d != "postgres:///x" {
		t.Errorf("the argument must win over DATABASE_URL: %q", d)
	}
	// Options alone name the server: DATABASE_URL is not the base they
	// are added to (its host would otherwise be mixed with -d's database).
	d, given, err := resolveArgs(t, "-d", "app db", "-U", "o'neil")
	cfg, perr := pgconn.ParseConfig(d)
	if err != nil || !given || perr != nil || cfg.Database != "app db" || cfg.User != "o'neil" || cfg.Host != "/tmp" {
		t.Errorf("options: %q %v %v %v", d, given, err, perr)
	}
}

// Options add to a connection string what it does not set, in both forms.
func TestResolveMerges(t *testing.T) {
	for _, tc := range []struct {
		args               []string
		host, user, dbname string
		port               uint16
	}{
		{[]string{"postgres://db.example:6432/app", "-U", "mon"}, "db.example", "mon", "app", 6432},
		{[]string{"-h", "/run/pg", "postgres:///app?sslmode=disable"}, "/run/pg", "", "app", 5432},
		{[]string{"host=db.example dbname='a=b c'", "-U", "mon", "-p", "7000"}, "db.example", "mon", "a=b c", 7000},
		{[]string{"--dsn", "user=mon", "-d", "app", "--host=h"}, "h", "mon", "app", 5432},
	} {
		d, _, err := resolveArgs(t, tc.args...)
		if err != nil {
			t.Errorf("%q: %v", tc.args, err)
			continue
		}
		cfg, err := pgconn.ParseConfig(d)
		if err != nil || cfg.Host != tc.host || cfg.Database != tc.dbname || cfg.Port != tc.port || (tc.user != "" && cfg.User != tc.user) {
			t.Errorf("%q: %q parses to host %q port %d user %q db %q (%v)", tc.args, d, cfg.Host, cfg.Port, cfg.User, cfg.Database, err)
		}
	}
}

func TestResolveConflicts(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"postgres://u@h/db", "-U", "v"}, "user"},
		{[]string{"postgres://h:5433/db", "-p", "5434"}, "port"},
		{[]string{"postgres:///db?host=/tmp", "-h", "/run"}, "host"},
		{[]string{"host=x hostaddr=1.2.3.4", "-h", "y"}, "host"},
		{[]string{"dbname = x", "-d", "y"}, "dbname"},
	} {
		_, _, err := resolveArgs(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a conflict on %s", tc.args, err, tc.want)
		}
	}
	// A quoted value that looks like a setting is not one.
	if _, _, err := resolveArgs(t, "application_name='host=x'", "-h", "y"); err != nil {
		t.Errorf("quoted host=: %v", err)
	}
}
