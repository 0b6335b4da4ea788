//go:build attack

package redislock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// Attack: many holds on a cluster, half watched before the listener's
// connection drops, half after it is back; every other one force-released
// while it is down; one also held by a Resume. Each force-released hold
// (and the Resume's Lock of one, by the same Locker) must end within 10s; the others stay.
func TestAttackForceReleaseManyOnCluster(t *testing.T) {
	const n = 40
	gate := newDialGate()
	cc := redistest.Cluster(t)
	prefix := redistest.Prefix(t)
	rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cc.Options().Addrs, ContextTimeoutEnabled: true, Dialer: gate.dial})
	t.Cleanup(func() { rdb.Close() })
	victim := lockerOn(t, rdb, Options{Prefix: prefix, Owner: "victim", TTL: time.Minute})
	admin := lockerOn(t, cc, Options{Prefix: prefix, Owner: "admin"})
	ctx := context.Background()
	within(t, "the listener subscribes", victim.listen(), 10*time.Second)
	defer victim.unlisten()
	holds := make([]*Lock, n)
	ctxs := make([]context.Context, n)
	for i := range n {
		k, err := victim.Acquire(ctx, fmt.Sprintf("k%d", i))
		if err != nil {
			t.Fatal(err)
		}
		holds[i] = k
		if i < n/2 {
			ctxs[i] = k.Context()
		}
	}
	res, err := victim.Resume(ctx, "k0", holds[0].Token())
	if err != nil {
		t.Fatal(err)
	}
	rctx := res.Context()
	gate.shut()
	within(t, "the listener redials", gate.dialing, 10*time.Second)
	for i := 0; i < n; i += 2 {
		if ok, err := admin.ForceRelease(ctx, fmt.Sprintf("k%d", i), "attack"); !ok || err != nil {
			t.Fatalf("ForceRelease k%d = %v, %v", i, ok, err)
		}
	}
	gate.open()
	deadline := time.Now().Add(10 * time.Second)
	for i := n / 2; i < n; i++ {
		ctxs[i] = holds[i].Context()
	}
	for i := range n {
		if i%2 == 1 {
			continue
		}
		select {
		case <-ctxs[i].Done():
		case <-time.After(time.Until(deadline)):
			t.Errorf("k%d (watched %s): not ended within 10s", i, map[bool]string{true: "early", false: "late"}[i < n/2])
		}
	}
	select {
	case <-rctx.Done():
	case <-time.After(time.Until(deadline) + time.Second):
		t.Error("the Resume's Lock of k0 not ended")
	}
	for i := 1; i < n; i += 2 {
		if ctxs[i].Err() != nil {
			t.Errorf("k%d, not force-released, ended: %v", i, context.Cause(ctxs[i]))
		}
	}
}

// Attack: grants racing resubscriptions. The victim's pub/sub connection
// is killed over and over (CLIENT KILL ID) while it acquires keys that an
// admin force-releases at once; each hold is watched before or after the
// force release. Every one must end within 10s.
func TestAttackForceReleaseRacingResubscribe(t *testing.T) {
	opt := redistest.Options(t)
	name := fmt.Sprintf("victim-%d", rand.Int64())
	opt.ClientName = name
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { rdb.Close() })
	ctl := redistest.Client(t)
	victim := lockerOn(t, rdb, Options{Prefix: redistest.Prefix(t), Owner: "victim", TTL: time.Minute})
	admin := newLocker(t, Options{Prefix: victim.prefix, Owner: "admin"})
	ctx := context.Background()
	within(t, "the listener subscribes", victim.listen(), 10*time.Second)
	defer victim.unlisten()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var kills int
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			list, err := ctl.ClientList(ctx).Result()
			if err == nil {
				for _, line := range strings.Split(list, "\n") {
					if strings.Contains(line, " name="+name+" ") && strings.Contains(line, "sub=1") {
						id := strings.TrimPrefix(strings.Fields(line)[0], "id=")
						if ctl.Do(ctx, "CLIENT", "KILL", "ID", id).Err() == nil {
							kills++
						}
					}
				}
			}
			time.Sleep(time.Duration(rand.N(5000)) * time.Microsecond)
		}
	})
	const n = 2000
	ctxs := make([]context.Context, n)
	for i := range n {
		k, err := victim.Acquire(ctx, fmt.Sprintf("r%d", i))
		if err != nil {
			t.Fatal(err)
		}
		early := i%2 == 0
		if early {
			ctxs[i] = k.Context()
		}
		if ok, err := admin.ForceRelease(ctx, fmt.Sprintf("r%d", i), "attack"); !ok || err != nil {
			t.Fatalf("ForceRelease r%d = %v, %v", i, ok, err)
		}
		if !early {
			ctxs[i] = k.Context()
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d kills of the listener's connection", kills)
	deadline := time.Now().Add(10 * time.Second)
	why := map[string]int{}
	defer func() { t.Logf("causes: %v", why) }()
	for i := range n {
		select {
		case <-ctxs[i].Done():
			why[context.Cause(ctxs[i]).Error()]++
			if !errors.Is(context.Cause(ctxs[i]), ErrLost) {
				t.Errorf("r%d: cause %v", i, context.Cause(ctxs[i]))
			}
		case <-time.After(time.Until(deadline)):
			t.Errorf("r%d (watched %s): not ended within 10s of the last force release", i, map[bool]string{true: "early", false: "late"}[i%2 == 0])
		}
	}
}
