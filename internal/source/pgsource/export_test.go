package pgsource

import (
	"testing"
	"time"
)

// SetNamesRetry shortens how long a relation's name stands before it is
// looked up again, until t ends.
func SetNamesRetry(t testing.TB, d time.Duration) {
	old := namesRetry
	namesRetry = d
	t.Cleanup(func() { namesRetry = old })
}
