package redislock

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/lockcore/registry"
)

// Seed 002's three metrics, with its names and bounded labels: the key
// pattern from the registry, never the key.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	rdb := redistest.Client(t)
	l := lockerOn(t, rdb, Options{Registerer: reg}) // the default prefix, as the seed
	second := lockerOn(t, rdb, Options{Registerer: reg})
	ctx := context.Background()
	tenant := strings.ReplaceAll(t.Name(), "/", "_")
	key := SessionKey(tenant, "agent-1", "customer-1", "web")
	t.Cleanup(func() { rdb.Del(context.Background(), DefaultPrefix+key) })

	k, err := l.Acquire(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	second.TryAcquire(ctx, key) // timeout
	waited := make(chan error, 1)
	go func() {
		w, err := second.Acquire(ctx, key, lockcore.Wait(30*time.Second))
		if err == nil {
			w.Release(ctx)
		}
		waited <- err
	}()
	waitForWaiters(t, l, key, 1)
	k.Release(ctx)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	k.Release(ctx) // not_held
	l.Acquire(ctx, "test:session", lockcore.TTL(time.Minute))
	t.Cleanup(func() { rdb.Del(context.Background(), DefaultPrefix+"test:session") })

	if n := testutil.CollectAndCount(reg, "session_lock_acquire_duration_seconds"); n != 2 {
		t.Errorf("%d acquire-duration series, want 2 (the session pattern and other)", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	patterns := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "session_lock_acquire_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			patterns[m.GetLabel()[0].GetValue()] = m.GetHistogram().GetSampleCount()
		}
	}
	if patterns[registry.SessionPattern] != 2 || patterns[registry.OtherPattern] != 1 {
		t.Errorf("acquire observations by pattern %v; want 2 under %s and 1 under %s", patterns, registry.SessionPattern, registry.OtherPattern)
	}
	if v := testutil.ToFloat64(l.m.wait); v != 1 {
		t.Errorf("session_lock_wait_total = %v, want 1", v)
	}
	for reason, want := range map[string]float64{ReasonTimeout: 1, ReasonNotHeld: 1, ReasonRedisError: 0, ReasonLost: 0} {
		if v := testutil.ToFloat64(l.m.failure.WithLabelValues(reason)); v != want {
			t.Errorf("session_lock_failure_total{reason=%q} = %v, want %v", reason, v, want)
		}
	}
}
