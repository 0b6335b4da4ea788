package lease

import (
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// hub wakes this process's waiters when a resource is released: from
// PostgreSQL's NOTIFY (any process) or from a release in this process
// (SQLite). Waiters of one resource queue in arrival order and a release
// wakes the first only, so eight goroutines waiting for one lock do not
// all retry at every hand-over; a waiter that cannot use its wake-up
// passes it on (see ticket users in lock.go). Missed wake-ups cost
// latency, never correctness: every waiter also retries on its backoff.
type hub struct {
	mu     sync.Mutex
	queues map[string][]*ticket
	// echoes counts, per key, this process's own releases whose waiter was
	// woken at once (wakeLocal): the NOTIFY each of them also sent comes
	// back through the listener and is not a new release.
	echoes map[string]int
}

// ticket is one waiter's place in a queue.
type ticket struct {
	ch chan struct{} // buffered: a wake-up is kept until the waiter looks
}

func newHub() *hub { return &hub{queues: map[string][]*ticket{}, echoes: map[string]int{}} }

// join queues a waiter for key; front puts it first (an upgrade: the only
// waiter that can proceed once the readers leave).
func (h *hub) join(key string, front bool) *ticket {
	t := &ticket{ch: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if front {
		h.queues[key] = append([]*ticket{t}, h.queues[key]...)
	} else {
		h.queues[key] = append(h.queues[key], t)
	}
	return t
}

// leave takes t out of its queue. A wake-up t received and did not use, or
// pass, goes to the next waiter.
func (h *hub) leave(key string, t *ticket, pass bool) {
	select {
	case <-t.ch:
		pass = true
	default:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[key]
	i := slices.Index(q, t)
	if i < 0 {
		return
	}
	q = slices.Delete(q, i, i+1)
	if len(q) == 0 {
		delete(h.queues, key)
		return
	}
	h.queues[key] = q
	if pass && i < len(q) {
		signal(q[i])
	}
}

// wake wakes the first waiter for key.
func (h *hub) wake(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.queues[key]; len(q) > 0 {
		signal(q[0])
	}
}

// wakeLocal wakes the first waiter for key after a release in this
// process, without waiting for the release's NOTIFY to come back; that
// NOTIFY, if the release sent one (notified), is then dropped by
// wakeNotified. A release that sent none (its waiter had joined here but
// not yet written its row) counts no echo: it would swallow the next
// release's NOTIFY from another process.
func (h *hub) wakeLocal(key string, notified bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if q := h.queues[key]; len(q) > 0 {
		signal(q[0])
		if notified {
			h.echoes[key]++
		}
	}
}

// wakeNotified handles a NOTIFY for key: it wakes the first waiter, unless
// the notification is the echo of a release wakeLocal already handled.
func (h *hub) wakeNotified(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := h.echoes[key]; n > 0 {
		if n == 1 {
			delete(h.echoes, key)
		} else {
			h.echoes[key] = n - 1
		}
		return
	}
	if q := h.queues[key]; len(q) > 0 {
		signal(q[0])
	}
}

// wakeNext wakes the waiter after t: t got a shared mode, or could not
// proceed only because of a waiter ahead of it.
func (h *hub) wakeNext(key string, t *ticket) {
	h.mu.Lock()
	defer h.mu.Unlock()
	q := h.queues[key]
	if i := slices.Index(q, t); i >= 0 && i+1 < len(q) {
		signal(q[i+1])
	}
}

// wakeAll wakes every waiter for key (job slots: each checks its own job).
func (h *hub) wakeAll(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range h.queues[key] {
		signal(t)
	}
}

// wakeEveryone wakes the first waiter of every key and every job waiter:
// after a lost listener connection, when notifications may have been
// missed.
func (h *hub) wakeEveryone() {
	h.mu.Lock()
	defer h.mu.Unlock()
	clear(h.echoes) // echoes sent while the listener was away are lost
	for key, q := range h.queues {
		if key == jobsKey {
			for _, t := range q {
				signal(t)
			}
		} else if len(q) > 0 {
			signal(q[0])
		}
	}
}

func signal(t *ticket) {
	select {
	case t.ch <- struct{}{}:
	default:
	}
}

// backoff is seed 004 §8.3's bounded retry: exponential, with jitter, capped.
type backoff struct {
	cur, hi time.Duration
}

func newBackoff(o Options) *backoff {
	lo, hi := o.backoff()
	return &backoff{cur: lo, hi: hi}
}

// next returns the next wait: uniformly in [d/2, d] for the current d, which
// then doubles up to the cap.
func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(2*b.cur, b.hi)
	return d/2 + rand.N(d/2+1)
}
