package lockcore_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/lockcore"
)

// fakeHold is a held lock of no store: the order check needs only Err.
type fakeHold struct{ lockcore.Hold }

func (fakeHold) Err() error { return nil }

// take is what a kind's acquire does for the order check: Check, then Push
// the grant into the lock's context.
func take(t *testing.T, ctx context.Context, class, name string) (context.Context, error) {
	t.Helper()
	e, err := lockcore.Check(ctx, "test", "", name, class)
	if err != nil {
		return ctx, err
	}
	e.Hold = fakeHold{}
	return lockcore.Push(ctx, e), nil
}

// A then B in one place, B then A in another: the second order is reported
// at its first occurrence, once, with both orders' sites (where B was taken
// under A, where A is taken under B); nesting one class in itself is not an
// inversion. A lock taken with nothing held records no site.
func TestOrderInversionReportedOnce(t *testing.T) {
	g := lockcore.NewOrderGraph()
	var got []lockcore.Inversion
	defer g.OnInversion(func(v lockcore.Inversion) { got = append(got, v) })()
	ctx := lockcore.WithOrder(context.Background(), g)

	a, _ := take(t, ctx, "AGENT", "AGENT 1")
	a, _ = take(t, a, "AGENT", "AGENT 2") // same class: not checked
	if _, err := take(t, a, "SESSION", "sesslock:c1"); err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("inversions before any: %v", got)
	}
	for range 2 {
		e, _ := lockcore.Check(ctx, "test", "", "sesslock:c2", "SESSION")
		e.Hold = fakeHold{}
		s := lockcore.Push(ctx, e)
		if _, err := lockcore.Check(s, "test", "", "AGENT 3", "AGENT"); err != nil { // the inverting acquire's
			t.Fatal(err)
		}
	}
	if len(got) != 1 || g.Inversions() != 1 {
		t.Fatalf("inversions %v (count %d), want one", got, g.Inversions())
	}
	v := got[0]
	if v.From != "SESSION" || v.To != "AGENT" || v.Name != "AGENT 3" || v.HeldName != "sesslock:c2" {
		t.Errorf("inversion %+v", v)
	}
	for _, site := range []string{v.Site, v.PathSite} {
		if !strings.Contains(site, "order_test.go:") {
			t.Errorf("site %q does not name this file", site)
		}
	}
	if v.Site == v.PathSite || v.HeldSite != "" {
		t.Errorf("sites %q and %q, held %q", v.Site, v.PathSite, v.HeldSite)
	}
	if len(g.History()) != 1 {
		t.Errorf("history %v", g.History())
	}
}

// A strict graph refuses the inverting acquire with ErrLockOrder, which
// matches ErrReentrant; a declared order is checked before the right order
// was ever seen.
func TestOrderStrictAndDeclared(t *testing.T) {
	g := lockcore.NewOrderGraph()
	g.SetStrict(true)
	g.DeclareOrder("PROJECT", "MAP", "SKETCH")
	ctx := lockcore.WithOrder(context.Background(), g)
	s, _ := take(t, ctx, "SKETCH", "sketch:s1")
	_, err := take(t, s, "PROJECT", "project:p1")
	if !errors.Is(err, lockcore.ErrLockOrder) || !errors.Is(err, lockcore.ErrReentrant) {
		t.Fatalf("PROJECT after SKETCH = %v, want ErrLockOrder", err)
	}
	if g.Inversions() != 1 {
		t.Errorf("count %d", g.Inversions())
	}
	// The process's graph declares the lease levels (lockcore/lease's init
	// does, when linked in); a fresh graph copies what it declared.
	rec := httptest.NewRecorder()
	g.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	var body struct {
		Edges      []lockcore.Edge      `json:"edges"`
		Inversions []lockcore.Inversion `json:"inversions"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if len(body.Edges) != 3 || len(body.Inversions) != 1 {
		t.Errorf("handler: %s", rec.Body.String())
	}
}

// A declared order holds on each store, and only within one: SKETCH then
// PROJECT on one store is an inversion with the path on that store, a
// SKETCH of one store then a PROJECT of another is not. The same class
// on two stores is two classes: nested one way and then the other, it is
// an inversion.
func TestOrderPerStore(t *testing.T) {
	g := lockcore.NewOrderGraph()
	g.SetStrict(true)
	g.DeclareOrder("PROJECT", "MAP", "SKETCH")
	ctx := lockcore.WithOrder(context.Background(), g)
	on := func(ctx context.Context, store, class string) (context.Context, error) {
		e, err := lockcore.Check(ctx, "test", store, class+"@"+store, class)
		if err != nil {
			return ctx, err
		}
		e.Hold = fakeHold{}
		return lockcore.Push(ctx, e), nil
	}
	a, _ := on(ctx, "A", "SKETCH")
	if _, err := on(a, "B", "PROJECT"); err != nil {
		t.Errorf("a PROJECT of B under a SKETCH of A: %v", err)
	}
	_, err := on(a, "A", "PROJECT")
	if !errors.Is(err, lockcore.ErrLockOrder) || !strings.Contains(err.Error(), "[PROJECT@A MAP@A SKETCH@A]") {
		t.Errorf("a PROJECT of A under a SKETCH of A: %v, want ErrLockOrder with the declared path on A", err)
	}
	m, _ := on(ctx, "A", "MAP")
	if _, err := on(m, "B", "MAP"); err != nil {
		t.Fatal(err)
	}
	m, _ = on(ctx, "B", "MAP")
	if _, err := on(m, "A", "MAP"); !errors.Is(err, lockcore.ErrLockOrder) {
		t.Errorf("MAP of A under MAP of B, after the reverse: %v, want ErrLockOrder", err)
	}
	if h := g.History(); len(h) != 2 || h[1].FromStore != "B" || h[1].ToStore != "A" {
		t.Errorf("inversions %+v", h)
	}
}

// The order check of an acquire with four locks held, every edge known:
// the cost every acquire pays while locks nest. min-ns/op is the fastest
// burst of 256 acquires: on a machine shared with other work it stays near
// the quiet machine's figure when ns/op does not.
func BenchmarkOrderCheckHeld4(b *testing.B) {
	g := lockcore.NewOrderGraph()
	ctx := lockcore.WithOrder(context.Background(), g)
	// Stores as long as the kinds' own: a database's identity, a Redis
	// address.
	const db, redis = "7441215458426914834/16384", "unix:/run/redis/redis-server.sock/0"
	for _, c := range []string{"PROJECT", "MAP", "SKETCH", "AGENT"} {
		e, _ := lockcore.Check(ctx, "test", db, c, c)
		e.Hold = fakeHold{}
		ctx = lockcore.Push(ctx, e)
	}
	_, _ = lockcore.Check(ctx, "test", redis, "s", "SESSION") // learn the edges
	bursts(b, func() {
		e, _ := lockcore.Check(ctx, "test", redis, "s", "SESSION")
		e.Hold = fakeHold{}
		_ = lockcore.Push(ctx, e)
	})
}

// What Check adds to: an entry pushed into a context with nothing
// checked, the floor of the benchmarks above and below.
func BenchmarkOrderCheckFloor(b *testing.B) {
	ctx := context.Background()
	bursts(b, func() {
		e := &lockcore.Entry{Kind: "test", Name: "s", Class: "SESSION"}
		e.Hold = fakeHold{}
		_ = lockcore.Push(ctx, e)
	})
}

// The same with nothing held: what every other acquire pays.
func BenchmarkOrderCheckHeld0(b *testing.B) {
	ctx := context.Background()
	bursts(b, func() {
		e, _ := lockcore.Check(ctx, "test", "", "s", "SESSION")
		e.Hold = fakeHold{}
		_ = lockcore.Push(ctx, e)
	})
}

// bursts runs fn b.N times in bursts of 256 and also reports the fastest
// burst's time per call (min-ns/op).
func bursts(b *testing.B, fn func()) {
	const n = 256
	b.ReportAllocs()
	best := time.Duration(math.MaxInt64)
	for i := 0; i < b.N; {
		start := time.Now()
		for range n {
			fn()
		}
		best = min(best, time.Since(start))
		i += n
	}
	b.ReportMetric(float64(best.Nanoseconds())/n, "min-ns/op")
}
