package redislock

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// keySlot is the cluster's own, for the hold and every other key of a lock.
func TestClusterKeySlot(t *testing.T) {
	cc := redistest.Cluster(t)
	ctx := context.Background()
	for i := range 50 {
		ks := keysFor("sesslock:", SessionKey(fmt.Sprint("tenant", i), "agent", "customer", "web"))
		for _, k := range append(ks.all(), "{x}y", "a{}b", "{", "}{") {
			want, err := cc.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			if got := keySlot(k); int64(got) != want {
				t.Errorf("keySlot(%q) = %d, the cluster says %d", k, got, want)
			}
		}
	}
}

// The whole lock works on a three-master Redis Cluster: every script's keys
// share a slot, notices reach a Locker whatever node it listens on, and
// Inspect reads every master.
func TestCluster(t *testing.T) {
	cc := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	holder := lockerOn(t, cc, Options{Prefix: prefix, Owner: "holder", TTL: time.Minute})
	waiter := lockerOn(t, redistest.Cluster(t), Options{Prefix: prefix, Owner: "waiter", Wait: 30 * time.Second})

	// Keys on every master.
	var keys []string
	nodes := map[int64]bool{}
	for i := 0; len(nodes) < 3 || len(keys) < 12; i++ {
		k := SessionKey(fmt.Sprint("t", i), "a", "c", "web")
		slot, err := cc.ClusterKeySlot(ctx, prefix+k).Result()
		if err != nil {
			t.Fatal(err)
		}
		nodes[slot*3/16384] = true
		keys = append(keys, k)
	}
	locks := map[string]*Lock{}
	for _, k := range keys {
		lk, err := holder.Acquire(ctx, k)
		if err != nil {
			t.Fatalf("Acquire %s on the cluster: %v", k, err)
		}
		locks[k] = lk
	}
	tbl, err := inspect(ctx, holder, 0)
	if err != nil || len(tbl.Locks) != len(keys) || tbl.Truncated {
		t.Fatalf("Inspect on the cluster = %d locks (truncated %v), %v; want %d", len(tbl.Locks), tbl.Truncated, err, len(keys))
	}
	if lim, err := inspect(ctx, holder, 5); err != nil || len(lim.Locks) != 5 || !lim.Truncated {
		t.Errorf("Inspect on the cluster, limit 5 = %d locks (truncated %v), %v", len(lim.Locks), lim.Truncated, err)
	}

	// Hand-over to waiters on every key, through notices.
	var wg sync.WaitGroup
	got := make(chan *Lock, len(keys))
	for _, k := range keys {
		wg.Go(func() {
			lk, err := waiter.Acquire(ctx, k)
			if err != nil {
				t.Errorf("waiting for %s: %v", k, err)
				return
			}
			got <- lk
		})
	}
	for _, k := range keys {
		waitForWaiters(t, holder, k, 1)
	}
	for _, k := range keys {
		if err := locks[k].Release(ctx); err != nil {
			t.Fatalf("Release %s: %v", k, err)
		}
	}
	wg.Wait()
	close(got)
	for lk := range got {
		if lk.Fence() <= locks[lk.Key()].Fence() {
			t.Errorf("%s: fence %d after hand-over, not above %d", lk.Key(), lk.Fence(), locks[lk.Key()].Fence())
		}
		r, err := holder.Resume(ctx, lk.Key(), lk.Token())
		if err != nil || r.Fence() != lk.Fence() {
			t.Errorf("Resume %s on the cluster: %v", lk.Key(), err)
			continue
		}
		if err := r.Release(ctx); err != nil {
			t.Errorf("Release %s: %v", lk.Key(), err)
		}
	}
	if st := holder.Stats(); st.HandOvers != int64(len(keys)) {
		t.Errorf("hand-overs %d, want %d", st.HandOvers, len(keys))
	}

	// A force release reaches the victim's listener across nodes, and is
	// audited.
	errc := make(chan error, 1)
	go func() {
		errc <- waiter.With(ctx, keys[0], func(ctx context.Context) error {
			<-ctx.Done()
			return nil
		})
	}()
	pgtest.Eventually(t, "the victim holds "+keys[0], func() bool {
		held, err := holder.IsLocked(ctx, keys[0])
		return err == nil && held
	})
	if ok, err := holder.ForceRelease(ctx, keys[0], "cluster test"); !ok || err != nil {
		t.Fatalf("ForceRelease = %v, %v", ok, err)
	}
	select {
	case err := <-errc:
		if !errors.Is(err, ErrLost) {
			t.Errorf("victim's With = %v, want ErrLost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the force release did not reach the victim")
	}
	if recs, err := holder.Audit(ctx); err != nil || len(recs) != 1 || recs[0].VictimOwner != "waiter" {
		t.Errorf("Audit on the cluster = %+v, %v", recs, err)
	}
	if err := holder.Healthy(ctx); err != nil {
		t.Errorf("Healthy on the cluster: %v", err)
	}
}
