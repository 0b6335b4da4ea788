package lockcore_test

import (
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// TestResolve: the options of an acquire, the last of each kind winning,
// nil ones skipped; an acquire with none allocates nothing for them (it
// allocated its Call: an option takes the Call's address).
func TestResolve(t *testing.T) {
	if c := lockcore.Resolve(); c != (lockcore.Call{}) {
		t.Errorf("Resolve() = %+v, want zero", c)
	}
	c := lockcore.Resolve(lockcore.Wait(time.Second), nil, lockcore.TTL(time.Minute), lockcore.Wait(2*time.Second))
	if c != (lockcore.Call{Wait: 2 * time.Second, TTL: time.Minute}) {
		t.Errorf("Resolve(Wait 1s, nil, TTL 1m, Wait 2s) = %+v", c)
	}
	var opts []lockcore.AcquireOption
	if a := testing.AllocsPerRun(100, func() { c = lockcore.Resolve(opts...) }); a != 0 {
		t.Errorf("Resolve without options made %v allocations, want 0", a)
	}
}
