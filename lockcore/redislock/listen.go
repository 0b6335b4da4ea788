package redislock

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// lingerFor keeps an unused listener subscribed for a while, so a Locker
// that waits now and then does not pay a SUBSCRIBE round trip every time.
var lingerFor = 30 * time.Second

// healthEvery is how long the listener waits for a message before it pings
// its connection, and then for the answer before it takes the connection
// for dead (half-open: a primary cut off in a failover says nothing) and
// subscribes on a new one.
var healthEvery = 3 * time.Second

// listener receives the notices sent to a Locker's channel: "g token fence
// claim" (a release handed the key to this waiter) and "r token fence" (this
// grant was force-released). One connection per Locker, whatever the number of
// keys and waiters; plain pub/sub reaches a subscriber on any node of a
// cluster.
type listener struct {
	mu    sync.Mutex
	ps    *redis.PubSub // replaced when the health check finds it dead
	ready chan struct{} // closed at the first subscription confirmation
	quit  context.Context
	stopf context.CancelFunc
	done  chan struct{}
	check sync.WaitGroup // checks of the watched holds, one per subscription
}

// listen takes a use of the listener, starting it if need be, and returns
// a channel closed once it is subscribed. Nothing is sent to Redis here:
// the listener subscribes in its own goroutine, retrying while Redis is
// away, so a waiter keeps polling meanwhile.
func (l *Locker) listen() (ready <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.linger != nil {
		l.linger.Stop()
		l.linger = nil
	}
	if l.lis == nil {
		quit, stop := context.WithCancel(context.Background())
		l.lis = &listener{ps: l.pubSub(quit), ready: make(chan struct{}), quit: quit, stopf: stop, done: make(chan struct{})}
		go l.receive(l.lis)
	}
	l.users++
	return l.lis.ready
}

// unlisten gives back a use of the listener; the last one arms the linger
// timer that stops it.
func (l *Locker) unlisten() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.users--
	if l.users > 0 || l.lis == nil {
		return
	}
	lis := l.lis
	l.linger = time.AfterFunc(lingerFor, func() {
		l.mu.Lock()
		if l.lis != lis || l.users > 0 {
			l.mu.Unlock()
			return
		}
		l.lis, l.linger, l.epoch = nil, nil, 0
		l.mu.Unlock()
		lis.stop()
	})
}

func (lis *listener) stop() {
	lis.stopf()
	lis.mu.Lock()
	if lis.ps != nil {
		_ = lis.ps.Close()
	}
	lis.mu.Unlock()
	<-lis.done
	lis.check.Wait()
}

// pubSub returns a new PubSub of l's client, subscribed to nothing yet, or
// nil. A Ring has no PubSub of its own: go-redis's Ring.Subscribe takes
// the shard of its first channel, and panics when given none or when no
// shard is up. The Locker takes that shard itself (the one the Ring would
// take), and nil when no shard is up.
func (l *Locker) pubSub(ctx context.Context) *redis.PubSub {
	r, ok := l.rdb.(*redis.Ring)
	if !ok {
		return l.rdb.Subscribe(ctx)
	}
	c, err := r.GetShardClientForKey(l.channel)
	if err != nil {
		return nil
	}
	return c.Subscribe(ctx)
}

func (lis *listener) pubsub() *redis.PubSub {
	lis.mu.Lock()
	defer lis.mu.Unlock()
	return lis.ps
}

// redial replaces the connection by a new subscription (none while a
// Ring has no shard up: the old one fails meanwhile); false once the
// listener stops.
func (lis *listener) redial(l *Locker) bool {
	ps := l.pubSub(lis.quit)
	if ps == nil {
		return lis.quit.Err() == nil
	}
	_ = ps.Subscribe(lis.quit, l.channel) // confirmed through Receive, as the first
	return lis.swap(ps)
}

// swap makes ps the listener's PubSub, closing the one it replaces; false
// (ps closed) once the listener stops.
func (lis *listener) swap(ps *redis.PubSub) bool {
	lis.mu.Lock()
	if lis.quit.Err() != nil {
		lis.mu.Unlock()
		_ = ps.Close()
		return false
	}
	old := lis.ps
	lis.ps = ps
	lis.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
	return true
}

// timedOut reports whether err is a read deadline passing.
func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// receive subscribes, then reads notices until the listener stops. go-redis
// reconnects and subscribes again after a connection error; notices sent
// meanwhile are lost, so every resubscription asks the waiters to poll at
// once, and every subscription checks the watched holds: a Redis that
// restarted, or a failover to a replica the grant had not reached, has lost
// them, and their holders learn it now rather than at their next extend.
func (l *Locker) receive(lis *listener) {
	defer close(lis.done)
	backoff := 10 * time.Millisecond
	pause := func() bool {
		select {
		case <-lis.quit.Done():
			return false
		case <-time.After(backoff):
			backoff = min(2*backoff, time.Second)
			return true
		}
	}
	for {
		ps := lis.pubsub()
		if ps == nil { // a Ring that had no shard up
			if ps = l.pubSub(lis.quit); ps != nil && !lis.swap(ps) {
				return
			}
		}
		if ps != nil && ps.Subscribe(lis.quit, l.channel) == nil {
			break
		}
		if !pause() {
			return
		}
	}
	first, pinged := true, false
	for {
		ps := lis.pubsub()
		msg, err := ps.ReceiveTimeout(lis.quit, healthEvery)
		switch {
		case err != nil && lis.quit.Err() != nil:
			return
		case err != nil && timedOut(err) && !pinged:
			// Quiet for a while: ask the connection to answer.
			pinged = true
			_ = ps.Ping(lis.quit)
			continue
		case err != nil && timedOut(err):
			// No answer to the ping: the connection is dead, maybe without
			// knowing it (half-open). go-redis redials only after an error,
			// so subscribe again on a new connection.
			pinged = false
			if !lis.redial(l) {
				return
			}
			continue
		case err != nil:
			pinged = false
			if !pause() {
				return
			}
			continue
		}
		pinged = false
		backoff = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind != "subscribe" {
				continue
			}
			// Notices published before this subscription (the first, or
			// one after a dropped connection) reached nobody: the holds
			// watched now are checked in Redis, and a hold watched later
			// checks itself unless granted under this subscription.
			l.mu.Lock()
			current := l.lis == lis
			var holds []*Lock
			if current {
				l.epochs++
				l.epoch = l.epochs
				holds = l.watched()
			}
			l.mu.Unlock()
			if first {
				first = false
				close(lis.ready)
			} else {
				l.pokeWaiters()
			}
			if current {
				lis.check.Go(func() {
					l.checkHolds(lis.quit, holds)
					if f := holdsChecked.get(); f != nil {
						f()
					}
				})
			}
		case *redis.Message:
			if f := beforeNotice.get(); f != nil {
				f()
			}
			l.dispatch(m.Payload)
		}
	}
}

// dispatch delivers one notice. A hand-over ("g token fence claim") goes
// to its waiter, which judges whether it can take it as its grant; one that
// does not parse only wakes the waiter to poll.
func (l *Locker) dispatch(payload string) {
	f := strings.Fields(payload)
	switch {
	case len(f) == 4 && f[0] == "g":
		fence, err1 := strconv.ParseInt(f[2], 10, 64)
		claim, err2 := strconv.ParseInt(f[3], 10, 64)
		n := notice{grant: err1 == nil && err2 == nil, fence: fence, claim: time.Duration(claim) * time.Millisecond}
		l.mu.Lock()
		defer l.mu.Unlock()
		if ch := l.waiters[f[1]]; ch != nil {
			// A hand-over replaces a pending poke: it says more.
			select {
			case <-ch:
			default:
			}
			ch <- n
		}
	case (len(f) == 2 || len(f) == 3) && f[0] == "r":
		// "r token fence": the grant of token with that fence was
		// force-released. A waiter keeps its token across its polls, so
		// the token may hold the key again by now (a hand-over it did not
		// take, then its poll's own grant): only the named grant ends. A
		// notice without a fence (an older Locker's script) ends any.
		var fence int64
		if len(f) == 3 {
			fence, _ = strconv.ParseInt(f[2], 10, 64)
		}
		var ended []*Lock
		l.mu.Lock()
		for _, k := range l.holds[f[1]] {
			if revokes(fence, k.fence) {
				ended = append(ended, k)
			}
		}
		if ended == nil {
			l.revoked.add(f[1], fence, time.Now())
		}
		l.mu.Unlock()
		for _, k := range ended {
			k.lose("it was force-released")
		}
	}
}

// subscription returns the epoch of the listener's subscription up now, or
// 0.
func (l *Locker) subscription() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epoch
}

// watched returns the watched holds; l.mu is held.
func (l *Locker) watched() []*Lock {
	var holds []*Lock
	for _, ks := range l.holds {
		holds = append(holds, ks...)
	}
	return holds
}

// checkHolds asks Redis, in one round trip (a pipeline: the holds may be
// in different slots of a cluster), whether each hold's grant (its token
// and fence) still holds its key, and declares lost those whose grant does
// not: force-released, or lost to a restart or a failover, while no notice
// could reach this Locker. The fence matters as in a notice: the token may
// hold the key again under a later grant (see dispatch). A hold whose check
// gets no answer is left to its next extend.
func (l *Locker) checkHolds(ctx context.Context, holds []*Lock) {
	if len(holds) == 0 {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, cleanupTimeout)
	defer cancel()
	cmds := make([]*redis.SliceCmd, len(holds))
	_, _ = l.rdb.Pipelined(cctx, func(p redis.Pipeliner) error {
		for i, k := range holds {
			cmds[i] = p.HMGet(cctx, k.ks.hold, "t", "f")
		}
		return nil
	})
	for i, k := range holds {
		v, err := cmds[i].Result()
		if err != nil || len(v) < 2 {
			continue
		}
		tok, _ := v[0].(string)
		fence, _ := v[1].(string) // none in a hold written by an older Locker
		if tok != k.token || (fence != "" && fence != strconv.FormatInt(k.fence, 10)) {
			k.gone("Redis no longer has it (force-released, or lost to a restart or a failover, while no notice could reach this Locker)")
		}
	}
}

// pokeWaiters asks every waiting Acquire to poll now.
func (l *Locker) pokeWaiters() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ch := range l.waiters {
		select {
		case ch <- notice{}:
		default:
		}
	}
}

// revokedFor is how long a revocation notice that found no watched hold is
// kept for a watch that may still begin (With's run right after its grant,
// or a later Context call). A watch that begins later still learns of the
// force release at its first extend, as before.
var revokedFor = 10 * time.Minute

// revocations are the grants that revocation notices named while no
// watched hold had them, by token: the fence named (0: any) and when the
// notice came. Force releases are rare, so the set stays small; entries
// past revokedFor are swept when the set has doubled since the last sweep,
// so that a burst of them (thousands of force releases of holds this
// process never watched) costs each add O(1), not a scan of the set, in
// the goroutine that also delivers hand-overs.
type revocations struct {
	m     map[string]revocation
	sweep int // the size at which the next add sweeps
}

type revocation struct {
	fence int64
	at    time.Time
}

func (r *revocations) add(token string, fence int64, now time.Time) {
	if r.m == nil {
		r.m = map[string]revocation{}
	}
	if len(r.m) >= r.sweep {
		for t, v := range r.m {
			if now.Sub(v.at) > revokedFor {
				delete(r.m, t)
			}
		}
		r.sweep = max(2*len(r.m), 64)
	}
	r.m[token] = revocation{fence: fence, at: now}
}

// take reports whether a notice revoked the grant of token with fence, and
// forgets it.
func (r *revocations) take(token string, fence int64) bool {
	v, ok := r.m[token]
	if !ok || !revokes(v.fence, fence) {
		return false
	}
	delete(r.m, token)
	return true
}

// revokes reports whether a notice naming fence n (0: none) ends the grant
// with fence.
func revokes(n, fence int64) bool { return n == 0 || n == fence }
