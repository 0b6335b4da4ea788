package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/pgcluster"
	"github.com/locktop/locktop/lockcore"
)

// runDashboard is the bare "locktop" command. Until the dashboard exists it
// runs a short headless demo: 12 goroutines contend for 4 AGENT locks on a
// throw-away cluster while the lock table is printed every second.
func runDashboard(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("", stderr)
	dur := fs.Duration("duration", 5*time.Second, "how long the headless demo runs")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "starting a throw-away PostgreSQL...")
	c, err := pgcluster.Start(ctx, pgcluster.Options{})
	if err != nil {
		return err
	}
	defer c.Stop()
	pool, err := pgxpool.New(ctx, c.DSN("postgres"))
	if err != nil {
		return err
	}
	defer pool.Close()
	s := lockcore.New(pool, lockcore.WithDefaultTimeout(2*time.Second))

	ctx, cancel := context.WithTimeout(ctx, *dur)
	defer cancel()
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			for ctx.Err() == nil {
				err := s.With(ctx, lockcore.AgentKey(rand.Int32N(4)+1), func(ctx context.Context) error {
					select {
					case <-time.After(time.Duration(50+rand.IntN(200)) * time.Millisecond):
					case <-ctx.Done():
					}
					return nil
				})
				if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
					fmt.Fprintln(stderr, err)
				}
			}
		})
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			snap, err := lockcore.Inspect(ctx, pool)
			if err != nil {
				continue
			}
			tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "\n%s\tKEY\tPID\tSTATE\tQUEUE\tWAITED\tBLOCKED BY\n", snap.Taken.Format("15:04:05"))
			for _, l := range snap.Locks {
				st := "holds"
				if !l.Granted {
					st = "waits"
				}
				fmt.Fprintf(tw, "\t%s\t%d\t%s\t%d\t%s\t%v\n", l.KeyLabel(), l.PID, st, l.QueuePos, l.Waited.Round(time.Millisecond), l.BlockedBy)
			}
			tw.Flush()
		}
	}
	wg.Wait()
	fmt.Fprintln(stdout, "\ndone; the throw-away cluster is removed.")
	return nil
}
