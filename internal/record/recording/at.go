package recording

import (
	"fmt"
	"strings"
	"time"
)

// ParseAt reads a time in a recording that spans first..last, as
// people type it (in the local time zone):
//
//	03:12:05, 03:12       that time of day, on the day the recording was at it
//	2026-01-15 03:12:05   a date and time (also RFC 3339)
//	90s, 1h2m             that long after the start
//	+30s, -1m             that long after or before cur
//	start, end            the first or the last snapshot
func ParseAt(text string, first, last, cur time.Time) (time.Time, error) {
	s := strings.TrimSpace(text)
	switch strings.ToLower(s) {
	case "start", "begin", "first":
		return first, nil
	case "end", "last":
		return last, nil
	case "":
		return time.Time{}, fmt.Errorf("no time given")
	}
	if s[0] == '+' || s[0] == '-' {
		d, err := time.ParseDuration(s[1:])
		if err != nil {
			return time.Time{}, fmt.Errorf("%q: not a duration such as +30s or -1m", text)
		}
		if s[0] == '-' {
			d = -d
		}
		return cur.Add(d), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return first.Add(d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999", "2006-01-02 15:04:05", "2006-01-02T15:04:05", "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	for _, layout := range []string{"15:04:05.999999999", "15:04:05", "15:04"} {
		clock, err := time.ParseInLocation(layout, s, time.Local)
		if err != nil {
			continue
		}
		// The first time the recording's clock showed that time of day.
		f := first.Local()
		t := time.Date(f.Year(), f.Month(), f.Day(), clock.Hour(), clock.Minute(), clock.Second(), clock.Nanosecond(), time.Local)
		if t.Before(f.Truncate(time.Second)) {
			t = t.AddDate(0, 0, 1)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: not a time (03:12:05, 2026-01-15 03:12:05, 90s after the start, +30s, -1m, start, end)", text)
}
