package redislock

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// auditLen caps the audit stream (approximately, as XADD MAXLEN ~ does).
const auditLen = 10000

// AuditRecord is one force release.
type AuditRecord struct {
	Key         string    // the lock's key, without the prefix
	Actor       string    // the Owner of the Locker that forced it
	Reason      string    // as given to ForceRelease
	VictimOwner string    // who held it
	VictimFence int64     // the victim's grant
	VictimToken string    // the first 6 characters of the victim's token, to match with Inspect; never the whole token
	At          time.Time // when, by Redis's clock
}

// ForceRelease deletes key's hold whoever has it (seed 002's force_release,
// for cleanup after failures), and reports whether there was one. The
// victim's Release and Extend then return ErrNotHeld; its Locker, if
// listening, cancels its context at once with cause ErrLost. The key goes
// to the longest waiter. Every force release is recorded in the audit
// stream (Audit): who, when, why, the victim's owner and fence. go-redis
// retrying the call after its reply was lost is harmless: the second run
// returns the first one's answer and releases nothing (the waiter just
// handed the key keeps it). A second call of ForceRelease is a second
// force release.
func (l *Locker) ForceRelease(ctx context.Context, key, reason string) (bool, error) {
	ks := keysFor(l.prefix, key)
	v, err := forceScript.Run(ctx, l.rdb, append(ks.all(), ks.forced(rand.Text()))).Slice()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		l.observeFailure(ReasonRedisError)
		return false, l.redisError(key, err)
	}
	if len(v) < 3 {
		return false, fmt.Errorf("redislock: unexpected reply %v", v)
	}
	l.count.forced.Add(1)
	tok, _ := v[0].(string)
	fence, _ := parseInt(v[1])
	owner, _ := v[2].(string)
	// The audit stream lives in a slot of its own, so it is written after
	// the delete: on a failure here the lock is gone but unrecorded.
	err = l.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: auditKey(l.prefix), MaxLen: auditLen, Approx: true,
		Values: []any{"key", key, "actor", l.owner, "reason", reason, "owner", owner, "fence", fence, "token", tok},
	}).Err()
	if err != nil {
		l.observeFailure(ReasonRedisError)
		return true, fmt.Errorf("redislock: %s was force-released, but the audit record was not written: %w", key, l.redisError(key, err))
	}
	return true, nil
}

// Audit returns the recorded force releases, newest first (up to the last
// 10,000).
func (l *Locker) Audit(ctx context.Context) ([]AuditRecord, error) {
	msgs, err := l.rdb.XRevRange(ctx, auditKey(l.prefix), "+", "-").Result()
	if err != nil {
		return nil, l.redisError("audit", err)
	}
	out := make([]AuditRecord, 0, len(msgs))
	for _, m := range msgs {
		str := func(k string) string { s, _ := m.Values[k].(string); return s }
		fence, _ := strconv.ParseInt(str("fence"), 10, 64)
		msec, _, _ := strings.Cut(m.ID, "-")
		at, _ := strconv.ParseInt(msec, 10, 64)
		out = append(out, AuditRecord{
			Key: str("key"), Actor: str("actor"), Reason: str("reason"), VictimOwner: str("owner"),
			VictimFence: fence, VictimToken: str("token"), At: time.UnixMilli(at),
		})
	}
	return out, nil
}
