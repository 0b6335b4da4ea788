package history

import (
	"fmt"
	"strings"
	"time"
)

// ParseTime reads a moment as an HTTP client or an operator gives it:
//
//	2026-01-15T03:12:05Z   RFC 3339 (any offset; fractions of a second too)
//	03:12:05, 03:12        that time of day, today (in now's time zone)
//	-5m, -90s              that long before now
func ParseTime(text string, now time.Time) (time.Time, error) {
	s := strings.TrimSpace(text)
	if s == "" {
		return time.Time{}, fmt.Errorf("no time given")
	}
	if s[0] == '-' {
		if d, err := time.ParseDuration(s[1:]); err == nil {
			return now.Add(-d), nil
		}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"15:04:05.999999999", "15:04:05", "15:04"} {
		if c, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return time.Date(now.Year(), now.Month(), now.Day(), c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), now.Location()), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q: not a time (RFC 3339 such as 2026-01-15T03:12:05Z, a time of day today such as 03:12:05, or -5m)", text)
}

// RangeError is a moment outside what the history keeps.
type RangeError struct {
	At          time.Time
	First, Last time.Time // the history's span; zero when it is empty
}

func (e *RangeError) Error() string {
	if e.First.IsZero() {
		return fmt.Sprintf("%s: the history holds nothing yet", e.At.Format(time.RFC3339))
	}
	return fmt.Sprintf("%s is outside the history, which keeps %s to %s", e.At.Format(time.RFC3339),
		e.First.Format(time.RFC3339), e.Last.Format(time.RFC3339))
}

// InRange returns a *RangeError unless t lies within first..last (a
// moment after the last snapshot is still within its poll interval:
// slack).
func InRange(t, first, last time.Time, slack time.Duration) error {
	if first.IsZero() || t.Before(first) || t.After(last.Add(slack)) {
		return &RangeError{At: t, First: first, Last: last}
	}
	return nil
}
