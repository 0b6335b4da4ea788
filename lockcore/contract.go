package lockcore

import (
	"context"
	"crypto/rand"
	"os"
	"strconv"
	"sync"
	"time"
)

// Hold is a held lock of any kind of the family: an advisory lock (*Lock),
// a Redis session lock (*redislock.Lock) or a lease (*lease.Lock). Code
// above the locks (the workers, a user's) can hold "a lock" through it
// without knowing its kind.
type Hold interface {
	// Context carries what the holder holds (for reentrancy and the order
	// check) and is cancelled when the lock is released (cause
	// ErrReleased) or lost (cause an error wrapping ErrLost).
	Context() context.Context
	// Done is closed once the lock is released or lost.
	Done() <-chan struct{}
	// Err is nil while the lock is held, wraps ErrLost once it is lost,
	// and wraps ErrReleased after Release.
	Err() error
	// Fence is the grant's fencing token: strictly greater than every
	// earlier grant's of the same lock.
	Fence() int64
	// Release frees the lock, even if ctx has ended. After a loss it
	// returns an error wrapping ErrLost.
	Release(ctx context.Context) error
	// Owner is the holder's owner id, as monitors show it (Owner).
	Owner() string
}

var _ Hold = (*Lock)(nil)

// Call is what the options of one acquire say. Every kind's Acquire and
// With take the same options (Wait, TTL) and read them with Resolve.
type Call struct {
	// Wait is how long to wait for a held lock; 0 means the kind's default
	// (its Service's, Locker's or Manager's Wait).
	Wait time.Duration
	// TTL is how long a grant lasts by itself, for kinds whose grants
	// expire unless extended (Redis); 0 means the default. Advisory locks
	// have none, leases take their Manager's.
	TTL time.Duration
}

// AcquireOption adjusts one acquire of any kind.
type AcquireOption interface{ ApplyAcquire(*Call) }

// Resolve returns what opts say.
func Resolve(opts ...AcquireOption) Call {
	if len(opts) == 0 {
		// Before c: an option's ApplyAcquire takes its address, which
		// puts it on the heap.
		return Call{}
	}
	var c Call
	for _, o := range opts {
		if o != nil {
			o.ApplyAcquire(&c)
		}
	}
	return c
}

// WaitOption is how long to wait for a held lock. Given to New it is the
// Service's default; given to an acquire (of any kind) it is that
// acquire's.
type WaitOption time.Duration

// Wait says how long an acquire waits for a held lock. A wait <= 0 means
// the default. TryAcquire and TryWith do not wait.
func Wait(d time.Duration) WaitOption { return WaitOption(d) }

// ApplyAcquire sets the acquire's wait.
func (w WaitOption) ApplyAcquire(c *Call) {
	if w > 0 {
		c.Wait = time.Duration(w)
	}
}

func (w WaitOption) apply(c *config) {
	if w > 0 {
		c.timeout = time.Duration(w)
	}
}

// TTLOption is how long a grant lasts by itself (see Call.TTL).
type TTLOption time.Duration

// TTL says how long this grant lasts unless extended, for kinds whose
// grants expire (Redis session locks); other kinds ignore it.
func TTL(d time.Duration) TTLOption { return TTLOption(d) }

// ApplyAcquire sets the acquire's TTL.
func (t TTLOption) ApplyAcquire(c *Call) {
	if t > 0 {
		c.TTL = time.Duration(t)
	}
}

// ownerKey is the context key of a task's owner id (WithOwner).
type ownerKey struct{}

// WithOwner returns a context whose locks, of every kind, are taken in the
// name of owner id rather than the Service's, Locker's or Manager's (which
// default to the process's, Owner()). Give each independent task of a
// process (a request, a job, an agent's turn) an id of its own, such as
// Owner()+"/"+taskID, where a monitor looks for deadlocks: with one id per
// process, a goroutine holding a lock and another waiting look like one
// party holding and waiting, and a wait-for graph can close a cycle that
// is none. An advisory lock so owned waits in the server's queue, never
// for an in-process hand-off (HandOff), and its connection's
// application_name names its owner while it holds (one more statement when
// a connection changes owner). "" leaves ctx as it is.
func WithOwner(ctx context.Context, id string) context.Context {
	if id == "" {
		return ctx
	}
	return context.WithValue(ctx, ownerKey{}, id)
}

// OwnerIn returns the owner id ctx carries (WithOwner), else def.
func OwnerIn(ctx context.Context, def string) string {
	if id, ok := ctx.Value(ownerKey{}).(string); ok {
		return id
	}
	return def
}

var (
	ownerOnce sync.Once
	ownerID   string
)

// Owner returns this process's owner id, "host:pid:rand" (the host name
// cut to 24 bytes, 4 random characters so a reused pid is told apart),
// which every kind stamps on the locks it takes unless told another: the
// application_name of advisory lock connections (model.AppWithOwner), the
// owner of a Redis hold, the owner of a lease. A monitor that sees the same
// id on a PostgreSQL backend and on a Redis or lease holder knows they are
// one holder. It is short enough to fit application_name's 63 bytes with
// the application's name.
func Owner() string {
	ownerOnce.Do(func() {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "localhost"
		}
		if len(host) > 24 {
			host = host[:24]
		}
		ownerID = host + ":" + strconv.Itoa(os.Getpid()) + ":" + rand.Text()[:4]
	})
	return ownerID
}
