package redislock

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

// A force release published while the victim's Locker has no subscription
// (its listener not yet subscribed, or resubscribing after its connection
// dropped) reaches nobody. The hold must still end once its Locker is
// subscribed and the hold watched, whichever comes first, not at its next
// extend a third of the TTL later. "watched late" begins the watch after
// the subscription's own check of the watched holds has run (With between
// its Acquire and its run, a Context call after a listener started for
// another key): that check could not see it.
func TestForceReleaseWhileUnsubscribed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		resub bool // the notice is lost to a dropped connection, not to a listener not yet started
		late  bool // the hold is watched after the subscription's check
	}{
		{"first subscription, watched early", false, false},
		{"first subscription, watched late", false, true},
		{"resubscription, watched early", true, false},
		{"resubscription, watched late", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gate := newDialGate()
			opt := redistest.Options(t)
			opt.Dialer = gate.dial
			rdb := redis.NewClient(opt)
			t.Cleanup(func() { rdb.Close() })
			victim := lockerOn(t, rdb, Options{Prefix: redistest.Prefix(t), Owner: "victim", TTL: time.Minute})
			admin := newLocker(t, Options{Prefix: victim.prefix, Owner: "admin"})
			ctx := context.Background()
			checked := make(chan struct{}, 4)
			holdsChecked.set(func() {
				select {
				case checked <- struct{}{}:
				default: // never block a listener
				}
			})
			t.Cleanup(holdsChecked.clear)

			if tc.resub {
				within(t, "the listener subscribes", victim.listen(), 10*time.Second)
				within(t, "the first subscription's check", checked, 10*time.Second)
			}
			k, err := victim.Acquire(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			var c context.Context
			if !tc.late {
				c = k.Context()
			}
			if tc.resub {
				// Drop every connection and hold back the redial: the
				// listener is unsubscribed until the gate opens.
				gate.shut()
				within(t, "the listener redials", gate.dialing, 10*time.Second)
			}
			if ok, err := admin.ForceRelease(ctx, "k", "test"); !ok || err != nil {
				t.Fatalf("ForceRelease = %v, %v", ok, err)
			}
			if tc.resub {
				gate.open()
			} else {
				victim.listen()
			}
			defer victim.unlisten()
			within(t, "the subscription's check of the watched holds", checked, 10*time.Second)
			if tc.late {
				c = k.Context()
			}
			select {
			case <-c.Done():
			case <-time.After(10 * time.Second):
				t.Fatal("a hold force-released while its Locker was not subscribed was not ended within 10s of its subscription and watch")
			}
			if !errors.Is(context.Cause(c), ErrLost) {
				t.Errorf("cause %v, want ErrLost", context.Cause(c))
			}
		})
	}
}

// The subscription's check ends a grant, not a token: a force release
// of the grant that reached nobody may be followed by a later grant to the
// same token (a waiter keeps its token across polls; see dispatch), which
// the check must not take for the first. Here the key's hash is rewritten
// to the same token under the next fence while the Locker is not
// subscribed, as that later grant leaves it.
func TestSubscriptionCheckEndsTheGrantNotTheToken(t *testing.T) {
	victim := newLocker(t, Options{Owner: "victim", TTL: time.Minute})
	ctx := context.Background()
	checked := make(chan struct{}, 4)
	holdsChecked.set(func() {
		select {
		case checked <- struct{}{}:
		default: // never block a listener
		}
	})
	t.Cleanup(holdsChecked.clear)
	k, err := victim.Acquire(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	c := k.Context()
	if err := victim.rdb.HSet(ctx, victim.prefix+"k", "f", k.Fence()+1).Err(); err != nil {
		t.Fatal(err)
	}
	victim.listen()
	defer victim.unlisten()
	within(t, "the subscription's check of the watched holds", checked, 10*time.Second)
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatalf("the token holds the key under fence %d, not the hold's %d, but the hold was not ended", k.Fence()+1, k.Fence())
	}
	if !errors.Is(context.Cause(c), ErrLost) {
		t.Errorf("cause %v, want ErrLost", context.Cause(c))
	}
}

// dialGate dials the test server; shut closes every connection dialed so
// far and holds back new dials (signalling dialing) until open.
type dialGate struct {
	mu      sync.Mutex
	conns   []net.Conn
	held    chan struct{} // closed while dials go through
	dialing chan struct{} // closed at the first dial held back
	once    sync.Once
}

func newDialGate() *dialGate {
	g := &dialGate{held: make(chan struct{}), dialing: make(chan struct{})}
	close(g.held)
	return g
}

func (g *dialGate) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	select {
	case <-held:
	default:
		g.once.Do(func() { close(g.dialing) })
		select {
		case <-held:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.conns = append(g.conns, c)
	g.mu.Unlock()
	return c, nil
}

func (g *dialGate) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = make(chan struct{})
	for _, c := range g.conns {
		c.Close()
	}
	g.conns = nil
}

func (g *dialGate) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.held)
}
