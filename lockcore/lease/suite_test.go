package lease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// The conformance suite: every case runs on both stores, as subtests of
// TestPostgres and TestSQLite, each on tables of its own.
var suite = []struct {
	name string
	run  func(t *testing.T, e *env)
}{
	{"CompatibilityMatrix", testCompatibilityMatrix},
	{"UpgradeWaitsForReaders", testUpgradeWaitsForReaders},
	{"UpgradeRefused", testUpgradeRefused},
	{"UpgradeTimesOut", testUpgradeTimesOut},
	{"WriterNotStarved", testWriterNotStarved},
	{"WaiterWokenOnRelease", testWaiterWokenOnRelease},
	{"LeaseRunsOutAndIsTakenOver", testLeaseRunsOut},
	{"TakeoverAtFirstTryLeavesNoWaiter", testTakeoverFirstTry},
	{"RecoveryRefusedWhileLeaseLive", testRecoveryRefusedLeaseLive},
	{"RecoveryRefusedWhileHeartbeatFresh", testRecoveryRefusedHeartbeatFresh},
	{"RecoveryRefusedWhileJobActive", testRecoveryRefusedJobActive},
	{"RecoveryAuditedInSameTransaction", testRecoveryAuditAtomic},
	{"HeartbeatRenews", testHeartbeatRenews},
	{"LostWhenRowTaken", testLostWhenRowTaken},
	{"OrderRefused", testOrderRefused},
	{"AcquireAllSortsAndIsAllOrNone", testAcquireAll},
	{"TryAndTimeout", testTryAndTimeout},
	{"ListingAndMetadata", testListing},
	{"CloseReleases", testCloseReleases},
	{"JobCapsNeverExceeded", testJobCaps},
	{"JobFairness", testJobFairness},
	{"JobOwnsItsLocks", testJobOwnsLocks},
	{"AtomicWriteInterrupted", testAtomicWriteInterrupted},
	{"AtomicWriteFenced", testAtomicWriteFenced},
	{"AtomicWriteStalledKeepsNewerVersion", testAtomicWriteStalled},
	{"TwoProcesses", testTwoProcesses},
	{"JobIDReusedAfterKill", testJobIDReused},
	{"HolderKilledWhileHolding", testHolderKilled},
}

func TestPostgres(t *testing.T) { runSuite(t, postgresEnv) }
func TestSQLite(t *testing.T)   { runSuite(t, sqliteEnv) }

// runSuite runs the suite's cases in parallel, beside the package's other
// parallel tests (TestCrash's server start, the tests that wait for a lease
// or a backoff), rather than holding them back until the suite ends.
// TestSQLiteBusyIsASentinel, which changes sqliteBusy, stays sequential:
// it ends before any parallel test starts.
func runSuite(t *testing.T, newEnv func(*testing.T) *env) {
	t.Parallel()
	for _, c := range suite {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newEnv(t))
		})
	}
}

// acquire takes r or fails the test.
func acquire(t *testing.T, ctx context.Context, m *Manager, r Resource, mode Mode) *Lock {
	t.Helper()
	l, err := m.Acquire(ctx, r, mode)
	if err != nil {
		t.Fatalf("Acquire %s %s: %v", r, mode, err)
	}
	return l
}

// release frees l or fails the test.
func release(t *testing.T, l *Lock) {
	t.Helper()
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release %s: %v", l.Resource(), err)
	}
}

// tryFails reports whether a try of r in mode is refused with ErrLocked; a
// grant is released at once.
func tryFails(t *testing.T, m *Manager, r Resource, mode Mode) bool {
	t.Helper()
	l, err := m.TryAcquire(ctxT(t), r, mode)
	switch {
	case err == nil:
		release(t, l)
		return false
	case errors.Is(err, ErrLocked):
		return true
	default:
		t.Fatalf("TryAcquire %s %s: %v", r, mode, err)
		return false
	}
}

// waiting reports whether Locks lists a waiter for r in mode.
func waiting(t *testing.T, m *Manager, r Resource, mode Mode) bool {
	t.Helper()
	infos, err := m.Locks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(infos, func(i Info) bool { return !i.Granted && i.Resource == r && i.Mode == mode })
}

// holding returns the listed holders of r.
func holding(t *testing.T, m *Manager, r Resource) []Info {
	t.Helper()
	infos, err := m.Locks(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	var out []Info
	for _, i := range infos {
		if i.Granted && i.Resource == r {
			out = append(out, i)
		}
	}
	return out
}

// aged waits until every holder of r is past its lease (lapsed) and, if
// beat > 0, its heartbeat is older than beat, by the database's clock.
func aged(t *testing.T, m *Manager, r Resource, lapsed bool, beat time.Duration) {
	t.Helper()
	pgtest.Eventually(t, fmt.Sprintf("the holders of %s age (lapsed %v, heartbeat older than %s)", r, lapsed, beat), func() bool {
		locks, err := m.Locks(ctxT(t))
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range locks {
			if i.Granted && i.Resource == r {
				if lapsed && i.LeaseLeft >= 0 || i.HeartbeatAge <= beat {
					return false
				}
			}
		}
		return true
	})
}
