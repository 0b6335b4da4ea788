package monitor

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Kind classifies why the server could not be used.
type Kind int

// Kinds of ConnectError.
const (
	KindOther       Kind = iota
	KindBadDSN           // the DSN does not parse
	KindUnreachable      // nothing answers at the address, or it timed out
	KindAuth             // wrong password, or the role may not log in
	KindNoDatabase       // the database does not exist
	KindPrivilege        // the role lacks a privilege the statement needs
	KindLost             // the connection broke
)

// ConnectError is a failure to use the server, with a one-line message that
// never contains a password.
type ConnectError struct {
	Kind Kind
	Msg  string
	Err  error
}

func (e *ConnectError) Error() string {
	if e.Msg != "" {
		return e.Msg
	}
	return oneLine(e.Err.Error())
}

func (e *ConnectError) Unwrap() error { return e.Err }

// Describe turns a pgx error into a *ConnectError with a plain one-line
// message; nil stays nil and a *ConnectError passes through.
func Describe(err error) error {
	if err == nil {
		return nil
	}
	var ce *ConnectError
	if errors.As(err, &ce) {
		if ce.Msg == "" {
			ce.Msg = describeMsg(ce.Kind, ce.Err)
		}
		return ce
	}
	kind := classify(err)
	return &ConnectError{Kind: kind, Msg: describeMsg(kind, err), Err: err}
}

func classify(err error) Kind {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "28P01" || pgErr.Code == "28000":
			return KindAuth
		case pgErr.Code == "3D000":
			return KindNoDatabase
		case pgErr.Code == "42501":
			return KindPrivilege
		case strings.HasPrefix(pgErr.Code, "57P"), strings.HasPrefix(pgErr.Code, "08"):
			return KindLost
		}
		return KindOther
	}
	var pce *pgconn.ParseConfigError
	if errors.As(err, &pce) {
		return KindBadDSN
	}
	var ne net.Error
	var oe *net.OpError
	switch {
	case errors.As(err, &oe), errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded):
		return KindUnreachable
	}
	var cerr *pgconn.ConnectError
	if errors.As(err, &cerr) {
		return KindUnreachable
	}
	if pgconn.SafeToRetry(err) || strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "unexpected EOF") {
		return KindLost
	}
	return KindOther
}

func describeMsg(kind Kind, err error) string {
	var pgErr *pgconn.PgError
	errors.As(err, &pgErr)
	switch kind {
	case KindBadDSN:
		var pce *pgconn.ParseConfigError
		if errors.As(err, &pce) {
			// Drop pgx's "cannot parse `<dsn>`: " preamble: its password
			// redaction is best effort, and the operator knows the DSN.
			msg := pce.Error()
			if i := strings.LastIndex(msg, "`: "); i >= 0 {
				msg = msg[i+3:]
			}
			return "bad DSN: " + oneLine(msg)
		}
		return "bad DSN: " + oneLine(err.Error())
	case KindUnreachable:
		var oe *net.OpError
		if errors.As(err, &oe) {
			return "cannot reach the server: " + oneLine(oe.Error())
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return "cannot reach the server: timed out connecting"
		}
		return "cannot reach the server: " + oneLine(rootCause(err))
	case KindAuth:
		if pgErr != nil && pgErr.Code == "28P01" {
			return "authentication failed: wrong password (" + oneLine(pgErr.Message) + ")"
		}
		if pgErr != nil {
			return "not allowed to connect: " + oneLine(pgErr.Message)
		}
	case KindNoDatabase:
		if pgErr != nil {
			return "no such database: " + oneLine(pgErr.Message)
		}
	case KindPrivilege:
		if pgErr != nil {
			return "missing privilege: " + oneLine(pgErr.Message)
		}
	case KindLost:
		return "lost the connection to the server: " + oneLine(rootCause(err))
	}
	if pgErr != nil {
		return fmt.Sprintf("%s (SQLSTATE %s)", oneLine(pgErr.Message), pgErr.Code)
	}
	return oneLine(err.Error())
}

// rootCause is the innermost error's text, without pgx's "failed to connect
// to `user=... database=...`" preamble.
func rootCause(err error) string {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err.Error()
		}
		err = u
	}
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
