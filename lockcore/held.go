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
// body's context or Lock.Context) holds it.
func HolderPID(ctx context.Context, key Key) (uint32, bool) {
	if h := held(ctx, "", key); h != nil {
		return h.pid, true
	}
	return 0, false
}

// FenceOf returns the fencing token of key as held in ctx (a body's context
// or Lock.Context), and whether ctx holds key. The token is 0 when the
// Service that took the lock has fencing off.
func FenceOf(ctx context.Context, key Key) (int64, bool) {
	if h := held(ctx, "", key); h != nil {
		return h.fence, true
	}
	return 0, false
}
