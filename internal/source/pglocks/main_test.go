package pglocks_test

import (
	"testing"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
