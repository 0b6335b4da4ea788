package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
)

// DefaultAddr is where locktop serves unless told otherwise: loopback only,
// because /api/advisory-locks shows other sessions' queries.
const DefaultAddr = "127.0.0.1:9753"

// ShutdownTimeout is how long requests in flight get to finish once the
// server's context ends; then their connections are closed.
const ShutdownTimeout = 10 * time.Second

// AddrError is an address that cannot be listened on as given: malformed, or
// naming no local interface. Callers treat it as bad usage.
type AddrError struct {
	Addr string
	Err  error
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("bad listen address %q: %v (want host:port, e.g. %s)", e.Addr, e.Err, DefaultAddr)
}

func (e *AddrError) Unwrap() error { return e.Err }

// Listen opens a TCP listener on addr ("" means DefaultAddr). A malformed
// address is an *AddrError; a port in use or not permitted is the
// listener's own error.
func Listen(addr string) (net.Listener, error) {
	if addr == "" {
		addr = DefaultAddr
	}
	if _, port, err := net.SplitHostPort(addr); err != nil {
		return nil, &AddrError{Addr: addr, Err: err}
	} else if port == "" {
		return nil, &AddrError{Addr: addr, Err: errors.New("missing port")}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var dns *net.DNSError
		var ae *net.AddrError
		if errors.As(err, &dns) || errors.As(err, &ae) {
			return nil, &AddrError{Addr: addr, Err: err}
		}
		return nil, err
	}
	return ln, nil
}

// IsLoopback reports whether a listener's address is reachable from this
// machine only.
func IsLoopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

// ServeListener serves h on ln until ctx ends, and closes ln, as
// ServeConfig does with no web configuration.
func ServeListener(ctx context.Context, ln net.Listener, h http.Handler) error {
	return ServeConfig(ctx, ln, h, WebConfig{}, nil)
}

// ServeConfig serves h on ln until ctx ends, and closes ln. The web
// configuration (LoadWebConfig) turns on TLS and authentication; the
// exporter toolkit reads its file again for each new connection, so
// renewed certificates and changed users apply without a restart. The
// server's own complaints (a failed TLS handshake, a refused client
// certificate) go to log at Warn; nil means slog.Default(). When ctx ends
// it stops accepting at once and gives requests in flight ShutdownTimeout to
// finish before closing their connections; it returns nil after a clean
// shutdown. If serving fails first, it returns that error. Requests do not
// see ctx: a shutdown lets them finish rather than cancelling them.
func ServeConfig(ctx context.Context, ln net.Listener, h http.Handler, wc WebConfig, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	// The toolkit says at Info what it serves; the command says that itself.
	quiet := slog.New(minLevel{log.Handler(), slog.LevelWarn})
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() {
		file := wc.File
		noSystemd := false
		flags := &web.FlagConfig{WebListenAddresses: &[]string{ln.Addr().String()}, WebSystemdSocket: &noSystemd, WebConfigFile: &file}
		errc <- web.Serve(ln, srv, flags, quiet)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		_ = srv.Close()
		err = fmt.Errorf("requests still running %s after shutdown began were cut off", ShutdownTimeout)
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}

// minLevel passes on the records of its handler's at min or above.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{m.Handler.WithAttrs(a), m.min}
}
func (m minLevel) WithGroup(g string) slog.Handler { return minLevel{m.Handler.WithGroup(g), m.min} }
