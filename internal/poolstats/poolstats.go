// Package poolstats reports pgxpool connection pools as model.PoolStats,
// with the one figure pgxpool does not keep: how many goroutines wait for a
// connection right now.
package poolstats

import (
	"context"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/model"
)

// Of returns p's statistics under name, with waiting as the number of
// acquirers blocked now (lockcore.Service.Waiting for a lock pool, a
// Waiters' Count for others, or 0 when nobody counts). It reads memory
// only, so a metrics scrape may call it.
func Of(name string, p *pgxpool.Pool, waiting int64) model.PoolStats {
	st := p.Stat()
	return model.PoolStats{
		Name:      name,
		MaxConns:  st.MaxConns(),
		Total:     st.TotalConns(),
		InUse:     st.AcquiredConns(),
		Idle:      st.IdleConns(),
		Waiting:   waiting,
		Acquires:  st.AcquireCount(),
		Empty:     st.EmptyAcquireCount(),
		Canceled:  st.CanceledAcquireCount(),
		WaitTotal: st.AcquireDuration(),
	}
}

// Waiters counts the goroutines waiting in Acquire for a pooled
// connection. The zero value is ready; it is safe for concurrent use.
type Waiters struct{ n atomic.Int64 }

// Acquire is p.Acquire, counted while it waits.
func (w *Waiters) Acquire(ctx context.Context, p *pgxpool.Pool) (*pgxpool.Conn, error) {
	w.n.Add(1)
	defer w.n.Add(-1)
	return p.Acquire(ctx)
}

// Count returns how many goroutines wait in Acquire now.
func (w *Waiters) Count() int64 { return w.n.Load() }
