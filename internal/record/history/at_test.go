package history

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// ParseTime reads each form an HTTP client gives ?at= in; anything else
// is an error that lists the forms.
func TestParseTime(t *testing.T) {
	zone := time.FixedZone("X", 2*3600)
	now := time.Date(2026, 11, 26, 12, 30, 0, 0, zone)
	for in, want := range map[string]time.Time{
		"2026-11-26T10:29:58.5Z":    time.Date(2026, 11, 26, 10, 29, 58, 5e8, time.UTC),
		"2026-11-26T12:29:58+02:00": time.Date(2026, 11, 26, 12, 29, 58, 0, zone),
		"12:29:58":                  time.Date(2026, 11, 26, 12, 29, 58, 0, zone),
		" 08:15 ":                   time.Date(2026, 11, 26, 8, 15, 0, 0, zone),
		"12:29:58.25":               time.Date(2026, 11, 26, 12, 29, 58, 25e7, zone),
		"-5m":                       now.Add(-5 * time.Minute),
		"-90s":                      now.Add(-90 * time.Second),
	} {
		got, err := ParseTime(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseTime(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yesterday", "25:00", "-soon", "5m"} {
		if _, err := ParseTime(in, now); err == nil {
			t.Errorf("ParseTime(%q): no error", in)
		} else if in != "" && !strings.Contains(err.Error(), "RFC 3339") {
			t.Errorf("ParseTime(%q): %v; want the forms listed", in, err)
		}
	}
}

// A moment outside the kept range is a *RangeError that says the range;
// within the last poll's interval after the last snapshot is inside.
func TestInRange(t *testing.T) {
	first := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	last := first.Add(10 * time.Minute)
	for _, at := range []time.Time{first, last, last.Add(time.Second)} {
		if err := InRange(at, first, last, time.Second); err != nil {
			t.Errorf("InRange(%v): %v", at, err)
		}
	}
	var re *RangeError
	err := InRange(first.Add(-time.Second), first, last, time.Second)
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "which keeps 2026-11-26T12:00:00Z to 2026-11-26T12:10:00Z") {
		t.Errorf("before the first: %v", err)
	}
	if err := InRange(last.Add(2*time.Second), first, last, time.Second); !errors.As(err, &re) {
		t.Errorf("after the last and its slack: %v", err)
	}
	if err := InRange(first, time.Time{}, time.Time{}, time.Second); err == nil || !strings.Contains(err.Error(), "holds nothing yet") {
		t.Errorf("an empty history: %v", err)
	}
}
