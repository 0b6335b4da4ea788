package sim

import (
	"cmp"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxErrorShare is the share of attempts that may end in an error (not a
// timeout, a skip, a refused reentry or a lost lock: an error, as a Redis
// that answers MOVED or OOM gives) before a run fails though no invariant
// broke: a load test in which most of the work failed is not a pass.
// Errors while a fault is on (a Redis outage the run injected, or the
// database away while a restart is ridden out, and a second after) are
// the fault's and do not count; a run needs
// minErrors errors to fail this way, so one stray error in a short run
// does not.
const MaxErrorShare = 0.05

const (
	minErrors      = 3
	errorClasses   = 20          // distinct errors kept; more go under "other"
	errorsShown    = 5           // in the report, most frequent first
	faultAftermath = time.Second // errors this long after an injected outage are still its
)

// ErrorStats are the attempts that ended in an error, over every worker
// kind.
type ErrorStats struct {
	Attempts int64 `json:"attempts"`
	Errors   int64 `json:"errors"`
	// InFaults are the errors while an injected Redis outage was on or the
	// database was away: the fault's, not counted in Share.
	InFaults int64 `json:"in_faults"`
	// Share is (Errors - InFaults) / Attempts.
	Share float64 `json:"share"`
	// TooMany says Share is above MaxErrorShare (with at least 3 such
	// errors): the run failed.
	TooMany bool `json:"too_many"`
	// ByError are the most frequent errors, most frequent first, each with
	// its numbers written N so that one error on many keys counts as one.
	ByError []ErrorCount `json:"by_error,omitempty"`
}

// ErrorCount is how often one error happened.
type ErrorCount struct {
	Error string `json:"error"`
	Count int64  `json:"count"`
}

// errorTally counts errors by their text.
type errorTally struct {
	faultUntil atomic.Int64 // unix ns: errors before it are an injected fault's
	inFaults   atomic.Int64

	mu     sync.Mutex
	counts map[string]int64
}

var digits = regexp.MustCompile(`[0-9]+`)

// add counts one error.
func (t *errorTally) add(err error) {
	if time.Now().UnixNano() < t.faultUntil.Load() {
		t.inFaults.Add(1)
	}
	class := "unknown error"
	if err != nil {
		class = digits.ReplaceAllString(errLine(err), "N")
		if len(class) > 200 {
			class = class[:200] + "…"
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts == nil {
		t.counts = map[string]int64{}
	}
	if _, ok := t.counts[class]; !ok && len(t.counts) >= errorClasses {
		class = "other errors"
	}
	t.counts[class]++
}

// fault says an injected fault is on for d: errors until it ends (and
// faultAftermath after) are its.
func (t *errorTally) fault(d time.Duration) {
	until := time.Now().Add(d + faultAftermath).UnixNano()
	for {
		cur := t.faultUntil.Load()
		if cur >= until || t.faultUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}

func (t *errorTally) reset() {
	t.inFaults.Store(0)
	t.mu.Lock()
	t.counts = nil
	t.mu.Unlock()
}

// stats are the counts against attempts and errors (the workers' sums).
func (t *errorTally) stats(attempts, errors int64) ErrorStats {
	st := ErrorStats{Attempts: attempts, Errors: errors, InFaults: min(t.inFaults.Load(), errors)}
	counted := errors - st.InFaults
	if attempts > 0 {
		st.Share = float64(counted) / float64(attempts)
	}
	st.TooMany = counted >= minErrors && st.Share > MaxErrorShare
	t.mu.Lock()
	for e, n := range t.counts {
		st.ByError = append(st.ByError, ErrorCount{Error: e, Count: n})
	}
	t.mu.Unlock()
	slices.SortFunc(st.ByError, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), strings.Compare(a.Error, b.Error))
	})
	if len(st.ByError) > errorsShown {
		st.ByError = st.ByError[:errorsShown]
	}
	return st
}

// Line says how often the run's attempts failed, and with what.
func (st ErrorStats) Line() string {
	s := fmt.Sprintf("%d of %d attempts (%.1f%%) failed with an error", st.Errors, st.Attempts, 100*float64(st.Errors)/float64(max(st.Attempts, 1)))
	if st.InFaults > 0 {
		s += fmt.Sprintf(", %d of them during injected Redis outages", st.InFaults)
	}
	if len(st.ByError) > 0 {
		s += fmt.Sprintf("; most often (%d×): %s", st.ByError[0].Count, st.ByError[0].Error)
	}
	return s
}
