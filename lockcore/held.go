package lockcore

import "context"

// heldKey is one link of the list of keys a context holds: advisory locks
// are per database, so the key is qualified by the database's identity.
type heldKey struct {
	db    string
	key   Key
	pid   uint32
	fence int64
	next  *heldKey
}

type heldCtxKey struct{}

// held finds key in ctx's held list; db "" matches any database.
func held(ctx context.Context, db string, key Key) *heldKey {
	for h, _ := ctx.Value(heldCtxKey{}).(*heldKey); h != nil; h = h.next {
		if h.key == key && (db == "" || h.db == db) {
			return h
		}
	}
	return nil
}

func withHeld(ctx context.Context, h *heldKey) context.Context {
	h.next, _ = ctx.Value(heldCtxKey{}).(*heldKey)
	return context.WithValue(ctx, heldCtxKey{}, h)
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

// holds finds key in ctx's held list as held in s's database. Before s
// knows its database (its pool has served no acquire yet), nothing is.
func (s *Service) holds(ctx context.Context, key Key) *heldKey {
	db := s.database()
	if db == "" {
		return nil
	}
	return held(ctx, db, key)
}

// heldOnce finds key in ctx's held list if it is held there in one
// database only.
func heldOnce(ctx context.Context, key Key) *heldKey {
	h := held(ctx, "", key)
	if h == nil {
		return nil
	}
	for o := h.next; o != nil; o = o.next {
		if o.key == key && o.db != h.db {
			return nil
		}
	}
	return h
}
