package lockcore

import (
	"context"
	"time"
)

// held finds key in ctx's held set (the family's, Held) as an advisory
// lock; db "" matches any database.
func held(ctx context.Context, db string, key Key) *Lock {
	for e := Held(ctx); e != nil; e = e.next {
		if e.Kind != KindAdvisory {
			continue
		}
		if l, ok := e.Hold.(*Lock); ok && l.key == key && (db == "" || l.db == db) {
			return l
		}
	}
	return nil
}

// class is the key's class for the order check: its namespace's registry
// name ("AGENT"), the space in decimal, or "advisory" for an unnamed
// one-bigint key.
func (k Key) class() string {
	if n := k.Namespace(); n != "" {
		return n
	}
	return KindAdvisory
}

// Holds reports whether ctx (a body's context or Lock.Context) carries key
// as held by a lock of this package, in any database. A lost lock's context
// still carries it: check ctx.Err.
func Holds(ctx context.Context, key Key) bool { return held(ctx, "", key) != nil }

// HolderPID returns the backend pid whose session holds key, if ctx (a
// body's context or Lock.Context) holds it. A context that holds key in
// more than one database (nested Services on different databases) reports
// false, since it cannot tell which is meant: use Service.HolderPID.
func HolderPID(ctx context.Context, key Key) (uint32, bool) {
	if h := heldOnce(ctx, key); h != nil {
		return h.pid, true
	}
	return 0, false
}

// FenceOf returns the fencing token of key as held in ctx (a body's context
// or Lock.Context), and whether ctx holds key. The token is 0 when the
// Service that took the lock has fencing off. A context that holds key in
// more than one database (nested Services on different databases) reports
// false rather than a fence from the wrong database's sequence: use
// Service.FenceOf.
func FenceOf(ctx context.Context, key Key) (int64, bool) {
	if h := heldOnce(ctx, key); h != nil {
		return h.fence, true
	}
	return 0, false
}

// HolderPID returns the backend pid whose session holds key in s's
// database, if ctx (a body's context or Lock.Context) holds it there.
func (s *Service) HolderPID(ctx context.Context, key Key) (uint32, bool) {
	if h := s.holds(ctx, key); h != nil {
		return h.pid, true
	}
	return 0, false
}

// FenceOf returns the fencing token of key as held in ctx (a body's context
// or Lock.Context) in s's database, and whether ctx holds key there: the
// fence to write with to that database.
func (s *Service) FenceOf(ctx context.Context, key Key) (int64, bool) {
	if h := s.holds(ctx, key); h != nil {
		return h.fence, true
	}
	return 0, false
}

// holds finds key in ctx's held list as held in s's database. A Service
// whose pool has served no acquire yet learns its database first (one
// query, within s's timeout), if ctx holds key anywhere: a fresh pool on
// the database of a hold answers for it (TestAttackFenceOfOnAFreshPool).
// If that fails, nothing is held: no fence is better than a wrong one.
func (s *Service) holds(ctx context.Context, key Key) *Lock {
	db := s.database()
	if db == "" {
		if held(ctx, "", key) == nil || s.identifyFirst(ctx, time.Now().Add(s.timeout)) != nil {
			return nil
		}
		db = s.database()
	}
	return held(ctx, db, key)
}

// heldOnce finds key in ctx's held list if it is held there in one
// database only.
func heldOnce(ctx context.Context, key Key) *Lock {
	h := held(ctx, "", key)
	if h == nil {
		return nil
	}
	for e := Held(ctx); e != nil; e = e.next {
		if o, ok := e.Hold.(*Lock); ok && e.Kind == KindAdvisory && o.key == key && o.db != h.db {
			return nil
		}
	}
	return h
}
