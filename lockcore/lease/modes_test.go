package lease

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/lockcore"
)

// Modes: the compatibility matrix and upgrades, on both stores (the suite).

func testCompatibilityMatrix(t *testing.T, e *env) {
	a, b := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"})
	// Written out, not derived from compatible(), so that a wrong matrix fails.
	want := map[[2]Mode]bool{ // {held, wanted}: granted?
		{Read, Read}: true, {Read, Write}: false, {Read, Upgradeable}: true,
		{Write, Read}: false, {Write, Write}: false, {Write, Upgradeable}: false,
		{Upgradeable, Read}: true, {Upgradeable, Write}: false, {Upgradeable, Upgradeable}: false,
	}
	for pair, granted := range want {
		r := Map(fmt.Sprintf("m-%s-%s", pair[0], pair[1]))
		l := acquire(t, ctxT(t), a, r, pair[0])
		if refused := tryFails(t, b, r, pair[1]); refused == granted {
			t.Errorf("%s held, %s wanted: granted %v, want %v", pair[0], pair[1], !refused, granted)
		}
		release(t, l)
		// Free again: anything goes.
		if tryFails(t, b, r, pair[1]) {
			t.Errorf("%s refused after the %s holder left", pair[1], pair[0])
		}
	}
	// Many readers at once, with the one upgradeable holder.
	r := Sketch("shared")
	var locks []*Lock
	for range 3 {
		locks = append(locks, acquire(t, ctxT(t), b, r, Read))
	}
	locks = append(locks, acquire(t, ctxT(t), a, r, Upgradeable))
	if got := len(holding(t, a, r)); got != 4 {
		t.Errorf("%d holders listed, want 4", got)
	}
	fences := map[int64]bool{}
	for _, l := range locks {
		if fences[l.Fence()] {
			t.Errorf("fence %d given twice", l.Fence())
		}
		fences[l.Fence()] = true
		release(t, l)
	}
}

func testUpgradeWaitsForReaders(t *testing.T, e *env) {
	a, b, c := e.open(Options{Owner: "A"}), e.open(Options{Owner: "B"}), e.open(Options{Owner: "C"})
	r := Map("up")
	u := acquire(t, ctxT(t), a, r, Upgradeable)
	rd := acquire(t, ctxT(t), b, r, Read)
	before := u.Fence()
	done := make(chan error, 1)
	go func() { done <- u.Upgrade(ctxT(t)) }()
	pgtest.Eventually(t, "the upgrade waits", func() bool { return waiting(t, c, r, Write) })
	select {
	case err := <-done:
		t.Fatalf("Upgrade returned %v while a reader held the resource", err)
	default:
	}
	// While the upgrade waits, new readers are held back.
	if !tryFails(t, c, r, Read) {
		t.Error("a new reader got in while an upgrade waited")
	}
	if u.Mode() != Upgradeable {
		t.Errorf("mode %s while waiting", u.Mode())
	}
	release(t, rd)
	if err := <-done; err != nil {
		t.Fatalf("Upgrade: %v", err)
	}
	if u.Mode() != Write || u.Fence() <= before {
		t.Errorf("after upgrade: mode %s fence %d (was %d)", u.Mode(), u.Fence(), before)
	}
	if hs := holding(t, c, r); len(hs) != 1 || hs[0].Mode != Write || hs[0].Fence != u.Fence() {
		t.Errorf("holders after upgrade: %+v", hs)
	}
	if !tryFails(t, c, r, Read) {
		t.Error("a reader got in after the upgrade")
	}
	if waiting(t, c, r, Write) {
		t.Error("the upgrade's waiter row is still listed")
	}
	release(t, u)
}

func testUpgradeRefused(t *testing.T, e *env) {
	a := e.open(Options{Owner: "A"})
	for _, mode := range []Mode{Read, Write} {
		l := acquire(t, ctxT(t), a, Project("p-"+mode.String()), mode)
		if err := l.Upgrade(ctxT(t)); !errors.Is(err, ErrNotUpgradeable) {
			t.Errorf("Upgrade of a %s lock: %v, want ErrNotUpgradeable", mode, err)
		}
		release(t, l)
	}
	// Two readers can never both wait to upgrade: the second would-be
	// upgrader cannot even take the upgradeable mode.
	r := Project("two")
	u := acquire(t, ctxT(t), a, r, Upgradeable)
	if !tryFails(t, e.open(Options{Owner: "B"}), r, Upgradeable) {
		t.Error("a second upgradeable holder was let in")
	}
	release(t, u)
	if err := u.Upgrade(ctxT(t)); err == nil {
		t.Error("Upgrade after Release succeeded")
	}
}

func testUpgradeTimesOut(t *testing.T, e *env) {
	// A's Wait of a second bounds the Upgrade that must time out; its
	// grant, which must succeed, gets the tests' usual wait.
	a, b := e.open(Options{Owner: "A", Wait: time.Second}), e.open(Options{Owner: "B"})
	r := Map("slow")
	u, err := a.Acquire(ctxT(t), r, Upgradeable, lockcore.Wait(testOptions(Options{}).Wait))
	if err != nil {
		t.Fatal(err)
	}
	rd := acquire(t, ctxT(t), b, r, Read)
	if err := u.Upgrade(ctxT(t)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Upgrade with a reader staying: %v, want ErrTimeout", err)
	}
	if u.Mode() != Upgradeable || u.Err() != nil {
		t.Errorf("after a timed-out upgrade: mode %s err %v", u.Mode(), u.Err())
	}
	// Its waiter row is gone: readers come in again.
	if tryFails(t, b, r, Read) {
		t.Error("readers still held back after the upgrade gave up")
	}
	release(t, rd)
	release(t, u)
}
