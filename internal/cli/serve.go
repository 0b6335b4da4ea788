package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/locktop/locktop/internal/record/history"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/source"
)

func init() {
	register(command{name: "serve", summary: "serve /api/locks, /api/advisory-locks, /metrics and /healthz for a database, without a terminal", run: runServe})
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve")
	conn := addConnFlags(fs)
	tf := addTargetFlags(fs)
	addr := fs.String("http", httpapi.DefaultAddr, "address to serve on, host:port (loopback unless you say otherwise)")
	interval := fs.Duration("interval", 2*time.Second, "how often to poll the lock table for the metrics")
	record := fs.String("record", "", "also record every poll to this new `file` (locktop replay and report read it)")
	waitInterval := addWaitInterval(fs)
	hf := addHistoryFlags(fs)
	lf := addSourceFlags(fs)
	ef := addExposureFlags(fs, true)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *interval < minInterval {
		return usagef("--interval %s is too short (at least %s)", *interval, minInterval)
	}
	if err := checkWaitInterval(*waitInterval); err != nil {
		return err
	}
	hcfg, err := hf.config()
	if err != nil {
		return err
	}
	srcs, err := lf.config()
	if err != nil {
		return err
	}
	dsn, targets, err := tf.servers("serve", conn, srcs)
	if err != nil {
		return err
	}
	// Listen first: a bad or busy address fails before any connection is made.
	ln, err := listenHTTP(*addr)
	if err != nil {
		return err
	}
	exp, err := ef.resolve(ln)
	if err != nil {
		ln.Close()
		return err
	}
	if exp.warning != "" {
		fmt.Fprintln(stderr, "locktop: warning:", exp.warning)
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	st, err := OpenStack(ctx, StackConfig{DSN: dsn, Sources: srcs, Targets: targets, Interval: *interval, Listener: ln, Poll: true, Record: *record,
		History: hcfg, WaitInterval: *waitInterval, Web: exp.web, QueryText: exp.queryText, Log: log})
	if err != nil {
		return err
	}
	defer st.Close()
	info := st.Info()
	if info.Warning != "" {
		fmt.Fprintln(stderr, "locktop: warning:", info.Warning)
	}
	if targets != nil {
		fmt.Fprintf(stdout, "locktop serve: collecting from %s, polling every %s\n", st.Target(), *interval)
	} else {
		fmt.Fprintf(stdout, "locktop serve: watching database %q as %q (PostgreSQL %s), polling every %s\n",
			info.Database, info.User, info.Version, *interval)
	}
	for _, o := range st.Sources() {
		// The watched database's own lease tables only where it has them.
		if !source.Present(ctx, o) {
			continue
		}
		fmt.Fprintf(stdout, "also watching %s\n", o.Name())
	}
	fmt.Fprintf(stdout, "listening on %s://%s (/api/locks, /api/advisory-locks, /metrics, /healthz%s)\n", exp.web.Scheme(), ln.Addr(), pastEndpoints(st.History()))

	err = st.Run(ctx)
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "locktop serve: stopped")
	return nil
}

// pastEndpoints lists the endpoints of the kept past, when there is one.
func pastEndpoints(h *history.History) string {
	if h == nil {
		return ""
	}
	return ", /api/locks?at=, /api/report, /api/history"
}
