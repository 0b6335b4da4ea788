package main

import (
	"testing"

	"github.com/locktop/locktop/internal/pgtest"
)

// The tests of package main use a real PostgreSQL (the dashboard's
// end-to-end test and its benchmark), so the package gets one.
func TestMain(m *testing.M) { pgtest.Main(m) }
