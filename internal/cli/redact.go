package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

// redactor keeps a DSN's password off the screen and out of the log: every
// error text that reaches either passes through it.
type redactor struct {
	password string
	dsn      string
}

// text removes the password from s.
func (r *redactor) text(s string) string {
	if r.password == "" {
		return s
	}
	return strings.ReplaceAll(s, r.password, "xxxxx")
}

// err returns err with the password removed from its text; errors.Is and
// errors.As still see the original.
func (r *redactor) err(err error) error {
	if err == nil || r.password == "" || !strings.Contains(err.Error(), r.password) {
		return err
	}
	var ee exitError
	if errors.As(err, &ee) {
		return exitError{code: ee.code, err: redactedError{r.text(err.Error()), err}}
	}
	return redactedError{r.text(err.Error()), err}
}

// target names the server for the log: user@host:port/database, no
// password.
func (r *redactor) target() string {
	cfg, err := pgconn.ParseConfig(r.dsn)
	if err != nil {
		return "(unparsable DSN)"
	}
	return fmt.Sprintf("%s@%s:%d/%s", cfg.User, cfg.Host, cfg.Port, cfg.Database)
}

func (r *redactor) terminate(fn func(context.Context, int32) error) func(context.Context, int32) error {
	return func(ctx context.Context, pid int32) error { return r.err(fn(ctx, pid)) }
}

var passwordKV = regexp.MustCompile(`password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)`)

// newRedactor finds the password dsn carries, whether in the DSN itself
// or from PGPASSWORD or a password file.
func newRedactor(dsn string) *redactor {
	r := &redactor{dsn: dsn}
	if cfg, err := pgconn.ParseConfig(dsn); err == nil {
		r.password = cfg.Password
	} else if u, err := url.Parse(dsn); err == nil && u.User != nil {
		r.password, _ = u.User.Password()
	} else if m := passwordKV.FindStringSubmatch(dsn); m != nil {
		r.password = strings.Trim(m[1], "'")
	}
	return r
}

type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }

func (e redactedError) Unwrap() error { return e.err }

// redactingSource is a ui.Source whose errors never carry the password.
type redactingSource struct {
	ui.Source
	red *redactor
}

func (s redactingSource) Poll(ctx context.Context) (model.Snapshot, error) {
	snap, err := s.Source.Poll(ctx)
	return snap, s.red.err(err)
}
