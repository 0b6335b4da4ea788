package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/locktop/locktop/model"
	"github.com/locktop/locktop/ui"
)

func init() {
	register(command{name: "record", summary: "record every snapshot of the locks to a file, for replay and report (locktop record --out FILE)",
		about: "Records until --duration has passed or it is interrupted (Ctrl-C, SIGTERM). The file survives a crash:\n" +
			"a torn last record is skipped when it is read. Read it with locktop replay FILE and locktop report FILE.",
		run: runRecord})
}

// namedPoll is one source of lock snapshots, as the dashboard polls it.
type namedPoll struct {
	name string
	poll func(context.Context) (model.Snapshot, error)
}

func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("record")
	conn := addConnFlags(fs)
	tf := addTargetFlags(fs)
	out := fs.String("out", "", "the recording `FILE` to create (never overwritten)")
	interval := fs.Duration("interval", ui.DefaultInterval, "how often to read every source")
	duration := fs.Duration("duration", 0, "stop after this long (default: until interrupted)")
	sf := addSourceFlags(fs)
	ef := addExposureFlags(fs, false)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return fs.usageErr(fmt.Errorf("--out FILE is required"))
	}
	if *interval < minInterval {
		return usagef("--interval %s is too short (at least %s)", *interval, minInterval)
	}
	if *duration < 0 {
		return usagef("--duration %s is negative", *duration)
	}
	srcs, err := sf.config()
	if err != nil {
		return err
	}
	dsn, targets, err := tf.servers("record", conn, srcs)
	if err != nil {
		return err
	}
	exp, err := ef.resolve(nil)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	// The sources the dashboard polls: the server, and the others beside
	// it; the Stack records every answer.
	st, err := OpenStack(ctx, StackConfig{DSN: dsn, Sources: srcs, Targets: targets, Interval: *interval, Record: *out, QueryText: exp.queryText, Log: log})
	if err != nil {
		return err
	}
	defer st.Close()
	if w := st.Info().Warning; w != "" {
		fmt.Fprintln(stderr, "locktop: warning:", w)
	}
	sources := []namedPoll{{st.members[0].sourceName(), st.Server().Poll}}
	for _, o := range st.Sources() {
		sources = append(sources, namedPoll{o.Name(), o.Poll})
	}
	fmt.Fprintf(stdout, "locktop record: %s to %s every %s", st.Target(), *out, *interval)
	if *duration > 0 {
		fmt.Fprintf(stdout, " for %s", *duration)
	}
	fmt.Fprintln(stdout, "; Ctrl-C stops")

	rctx, stopRec := ctx, func() {}
	if *duration > 0 {
		rctx, stopRec = context.WithTimeout(ctx, *duration)
	}
	defer stopRec()
	var snaps atomic.Int64
	var wg sync.WaitGroup
	for _, s := range sources {
		wg.Go(func() {
			pollLoop(rctx, s, *interval, log, func(model.Snapshot) { snaps.Add(1) })
		})
	}
	wg.Wait()
	if err := st.Close(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "locktop record: %d snapshots, %d bytes, in %s\n", snaps.Load(), st.RecordedBytes(), *out)
	return nil
}

// pollLoop polls s every interval until ctx ends and hands each snapshot
// to got. A failing poll is logged once, and again when it recovers; the
// loop goes on.
func pollLoop(ctx context.Context, s namedPoll, interval time.Duration, log *slog.Logger, got func(model.Snapshot)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		pctx, cancel := context.WithTimeout(ctx, max(interval, 10*time.Second))
		snap, err := s.poll(pctx)
		cancel()
		switch {
		case err == nil:
			got(snap)
			if failing {
				log.Info("polling again", "source", s.name)
				failing = false
			}
		case ctx.Err() != nil:
			return
		case !failing:
			log.Warn("poll failed; retrying every interval", "source", s.name, "err", err.Error())
			failing = true
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
