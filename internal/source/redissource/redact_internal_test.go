package redissource

import (
	"errors"
	"strings"
	"testing"
)

// Whatever a Redis error says, the URL's password does not reach the
// banner, the log or the dashboard's status line through the source.
func TestErrorsKeepThePasswordOut(t *testing.T) {
	s, err := Open("redis://monitor:hunter2-secret@127.0.0.1:1/0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := s.describe(errors.New("ERR AUTH monitor hunter2-secret\nrefused")).Error()
	if strings.Contains(got, "hunter2-secret") || strings.Contains(got, "\n") {
		t.Errorf("describe gave %q", got)
	}
}
