package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// ErrNoFaketime means Options.MovableClock was asked for and libfaketime,
// which moves the server's clock, is not installed.
var ErrNoFaketime = errors.New("pgcluster: a movable clock needs libfaketime, not found under /usr/lib/*/faketime; install it with: apt-get install -y libfaketime")

// faketimeLibs are where Debian and a source build put libfaketime.
var faketimeLibs = []string{"/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1"}

// clock is the server's movable clock: libfaketime preloaded into every
// server process reads the offset from a file on each call for the time
// (no cache), so a new offset applies at once to every backend. Only the
// wall clock moves: the monotonic clock, which times the server's own
// waits, stays true.
type clock struct {
	lib, file string
	mu        sync.Mutex
	offset    time.Duration
}

func newClock(dir string) (*clock, error) {
	var lib string
	for _, g := range faketimeLibs {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			lib = m[0]
			break
		}
	}
	if lib == "" {
		return nil, ErrNoFaketime
	}
	c := &clock{lib: lib, file: filepath.Join(dir, "faketime")}
	if err := c.write(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *clock) env() []string {
	return []string{"LD_PRELOAD=" + c.lib, "FAKETIME_TIMESTAMP_FILE=" + c.file, "FAKETIME_NO_CACHE=1", "FAKETIME_DONT_FAKE_MONOTONIC=1"}
}

// write puts the offset in the file by a rename, so that a server process
// never reads a half-written one.
func (c *clock) write() error {
	tmp := c.file + ".new"
	if err := os.WriteFile(tmp, []byte("+"+strconv.FormatInt(int64(c.offset/time.Second), 10)+"\n"), 0o644); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if err := os.Rename(tmp, c.file); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// AdvanceClock moves the server's wall clock forward by d (whole seconds)
// from where it is, for every session at once: now(), the activity's and
// the locks' start times. It needs Options.MovableClock, and only moves
// forward. Once the clock has moved, the server's timers (statement_timeout,
// lock_timeout, deadlock_timeout) cannot be trusted: a backend waiting in
// epoll_wait, which libfaketime wraps, reads the true time in its alarm
// handler and takes the timeout for not yet due (a 200 ms statement_timeout
// did not end a pg_sleep(3)). It is for what a client reads, not for
// timeouts.
func (c *Cluster) AdvanceClock(d time.Duration) error {
	if c.clock == nil {
		return errors.New("pgcluster: AdvanceClock needs Options.MovableClock")
	}
	if d < 0 {
		return fmt.Errorf("pgcluster: AdvanceClock(%v): the clock only moves forward", d)
	}
	c.clock.mu.Lock()
	defer c.clock.mu.Unlock()
	c.clock.offset += d.Truncate(time.Second)
	return c.clock.write()
}
