package redislog

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// repeatAfter is how long a repeated line stays quiet when nothing says
// Redis recovered.
const repeatAfter = time.Minute

// logger is the go-redis logger Install sets.
type logger struct {
	mu         sync.Mutex
	log        *slog.Logger
	last       string    // the last line logged, its numbers masked
	at         time.Time // when it was logged
	suppressed int       // repeats of it left out since
}

var std = &logger{log: slog.New(slog.DiscardHandler)}

// Install makes go-redis log through log (a nil log: nowhere).
func Install(log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	std.mu.Lock()
	std.log, std.last, std.suppressed = log, "", 0
	std.mu.Unlock()
	redis.SetLogger(std)
}

// Healthy says Redis answered: the next failure is a change of state and is
// logged again.
func Healthy() {
	std.mu.Lock()
	defer std.mu.Unlock()
	if std.last != "" {
		std.log.Info("redis: answering again", "repeats", std.suppressed)
	}
	std.last, std.suppressed = "", 0
}

var digits = regexp.MustCompile(`[0-9]+`)

// Printf is go-redis's logging interface.
func (l *logger) Printf(_ context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	key := digits.ReplaceAllString(msg, "#")
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if key == l.last && now.Sub(l.at) < repeatAfter {
		l.suppressed++
		return
	}
	if key == l.last {
		l.log.Warn(msg, "repeats", l.suppressed)
	} else {
		l.log.Warn(msg)
	}
	l.last, l.at, l.suppressed = key, now, 0
}
