package lockcore

import (
	"context"
	"runtime"
	"strconv"
	"strings"
)

// The kinds of the family, as Entry.Kind names them.
const (
	KindAdvisory = "advisory"
	KindRedis    = "redis"
	KindLease    = "lease"
)

// Entry is one lock a context holds, of any kind of the family. Every
// kind's acquire puts one in the lock's context (Push), so the set a
// goroutine holds travels with its context across kinds: each kind reads it
// for its reentrancy check (Find), and the order check (Order) for the
// classes held.
//
// A lock is identified by its Kind, its Store and its Name: the same name
// on two stores (two databases or clusters, two Redis servers or logical
// databases, two lease tables) is two locks, which a context may hold at
// once, and whose classes the order check keeps apart.
type Entry struct {
	Kind string // KindAdvisory, KindRedis or KindLease
	// Store is where the lock lives, as its kind names it: a database's
	// identity (advisory), a Redis server and database (redislock), a
	// lease table (lease).
	Store string
	Name  string // the lock within its store: a key, a resource
	Class string // the lock's class for the order check: its registry name
	Hold  Hold   // the held lock

	site [siteDepth]uintptr // where it was acquired, if recorded (Site)
	next *Entry
}

// siteDepth is how many frames an acquisition site keeps: enough to get past
// the lock family's own frames to the caller's.
const siteDepth = 5

// Next returns the entry held before e in the same context, or nil.
func (e *Entry) Next() *Entry { return e.next }

// Site returns where e was acquired: the first frame outside the lock
// family's packages, "file:line (function)". Only an acquire that taught
// the order check a new edge records it (stack walks cost microseconds);
// others return "".
func (e *Entry) Site() string { return siteOf(e.site[:]) }

type entryKey struct{}

// Held returns the newest lock ctx holds, of any kind, or nil; Next walks
// the others, newest first. Released and lost locks stay in a context
// derived before they ended: check Hold.Err.
func Held(ctx context.Context) *Entry {
	e, _ := ctx.Value(entryKey{}).(*Entry)
	return e
}

// Push returns a context that holds e on top of what ctx holds. Kinds call
// it once per grant, with an Entry from Check.
func Push(ctx context.Context, e *Entry) context.Context {
	e.next = Held(ctx)
	return context.WithValue(ctx, entryKey{}, e)
}

// Find returns the newest entry of ctx's held set that is the lock named
// name on store of kind, or nil. It may have ended since: check Hold.Err.
func Find(ctx context.Context, kind, store, name string) *Entry {
	for e := Held(ctx); e != nil; e = e.next {
		if e.Kind == kind && e.Store == store && e.Name == name {
			return e
		}
	}
	return nil
}

// Carry returns ctx holding e and everything e was pushed on, whatever ctx
// held: for a context that should carry a lock without being derived from
// the lock's own (lease.Manager.AcquireAll).
func Carry(ctx context.Context, e *Entry) context.Context {
	return context.WithValue(ctx, entryKey{}, e)
}

// Check is the family's check before an acquire of the lock name on store
// (of kind, and of class): it records, for the order check, that class on
// store is taken after every class ctx holds (live), and reports an
// inversion (Order) if that closes a cycle. It returns the Entry to fill in
// (Hold) and Push once granted. The error, when the Order is strict and the
// acquire inverts the order, wraps ErrLockOrder. Its cost is a map lookup
// per class held while every edge is known; only an acquire that adds an
// edge walks the stack for its site.
func Check(ctx context.Context, kind, store, name, class string) (*Entry, error) {
	e := &Entry{Kind: kind, Store: store, Name: name, Class: class}
	h := Held(ctx)
	if h == nil {
		return e, nil // nothing held: no order to check
	}
	return e, orderOf(ctx).check(h, e)
}

// siteOf renders the first frame of pcs outside the lock family.
func siteOf(pcs []uintptr) string {
	frames := runtime.CallersFrames(pcs)
	var last runtime.Frame
	for {
		f, more := frames.Next()
		if f.PC == 0 {
			break
		}
		last = f
		if !inFamily(f.Function) {
			break
		}
		if !more {
			break
		}
	}
	if last.PC == 0 {
		return ""
	}
	return last.File + ":" + strconv.Itoa(last.Line) + " (" + last.Function + ")"
}

// familyPrefix is the import path of the lock family's packages.
const familyPrefix = "github.com/locktop/locktop/lockcore"

// inFamily reports whether fn (a runtime function name) is a function of the
// lock family's packages, not their tests.
func inFamily(fn string) bool {
	if len(fn) < len(familyPrefix) || fn[:len(familyPrefix)] != familyPrefix {
		return false
	}
	rest := fn[len(familyPrefix):]
	// lockcore.X, lockcore/redislock.X, lockcore/lease.X: a package of the
	// family (a test package's functions end in _test.Test...).
	for _, p := range []string{".", "/redislock.", "/lease."} {
		if len(rest) >= len(p) && rest[:len(p)] == p {
			return !strings.Contains(rest, "_test") && !strings.Contains(rest, ".Test")
		}
	}
	return false
}
