package pgsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

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
	KindTLS              // TLS failed: the certificate is not trusted, or the server will not speak TLS
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
	if isTLS(err) {
		return KindTLS
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return KindUnreachable
	}
	// Failing to open a connection is not reaching the server; a connection
	// that was open and then failed (broken pipe, reset, EOF after a
	// restart or a terminated backend) is a lost one, which a read-only
	// caller may retry at once on a fresh connection.
	var cerr *pgconn.ConnectError
	if errors.As(err, &cerr) {
		return KindUnreachable
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return KindUnreachable
	}
	var ne net.Error
	switch {
	case errors.As(err, &oe), errors.As(err, &ne),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		pgconn.SafeToRetry(err),
		strings.Contains(err.Error(), "conn closed"), strings.Contains(err.Error(), "unexpected EOF"):
		return KindLost
	}
	return KindOther
}

// isTLS reports whether err is a failed TLS negotiation: a certificate the
// client does not trust (or that names another host), a server that will
// not speak TLS when the DSN requires it, or a handshake the server broke
// off (it rejected the client's certificate).
func isTLS(err error) bool {
	var (
		cve  *tls.CertificateVerificationError
		ua   x509.UnknownAuthorityError
		he   x509.HostnameError
		ci   x509.CertificateInvalidError
		alrt tls.AlertError
		rhe  tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &cve), errors.As(err, &ua), errors.As(err, &he), errors.As(err, &ci),
		errors.As(err, &alrt), errors.As(err, &rhe):
		return true
	}
	// pgx's words for a server that answers "no" to the SSLRequest.
	return strings.Contains(err.Error(), "server refused TLS connection")
}

func describeMsg(kind Kind, err error) string {
	var pgErr *pgconn.PgError
	errors.As(err, &pgErr)
	var cerr *pgconn.ConnectError
	connecting := errors.As(err, &cerr)
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
	case KindTLS:
		var cve *tls.CertificateVerificationError
		switch {
		case strings.Contains(err.Error(), "server refused TLS connection"):
			return "TLS failed: the server does not accept TLS connections, and the DSN's sslmode requires TLS"
		case errors.As(err, &cve):
			return "TLS failed: the server's certificate is not trusted: " + oneLine(cve.Err.Error()) + " (see sslmode and sslrootcert)"
		}
		return "TLS failed: " + oneLine(rootCause(err))
	case KindUnreachable:
		var oe *net.OpError
		if errors.As(err, &oe) {
			return "cannot reach the server: " + oneLine(oe.Error())
		}
		if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
			if connecting {
				return "cannot reach the server: timed out connecting"
			}
			return "the server stopped answering: timed out"
		}
		return "cannot reach the server: " + oneLine(rootCause(err))
	case KindAuth:
		if pgErr != nil && pgErr.Code == "28P01" {
			if connecting && cerr.Config != nil && cerr.Config.Password == "" {
				return "authentication failed: no password given, and the server asks for one (set it in the DSN, PGPASSWORD or a password file)"
			}
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
