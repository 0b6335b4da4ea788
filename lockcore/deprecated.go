package lockcore

import (
	"log/slog"
	"time"
)

// The option names of the first API, which read like the methods With and
// WithTimeout. They keep working.

// WithDefaultTimeout sets the Service's timeout.
//
// Deprecated: use Timeout.
func WithDefaultTimeout(d time.Duration) Option { return Timeout(d) }

// WithApplicationName sets the application_name of lock connections.
//
// Deprecated: use ApplicationName.
func WithApplicationName(name string) Option { return ApplicationName(name) }

// WithSharedPool says the pool also serves other work.
//
// Deprecated: use SharedPool.
func WithSharedPool() Option { return SharedPool() }

// WithObserver adds an observer of every lock event.
//
// Deprecated: use Observe.
func WithObserver(o Observer) Option { return Observe(o) }

// WithLogger sets where lost locks, phantom unlocks and failed releases are
// logged.
//
// Deprecated: use Logger.
func WithLogger(l *slog.Logger) Option { return Logger(l) }
