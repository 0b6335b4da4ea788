package redislocks

import (
	"testing"

	"github.com/locktop/locktop/internal/testenv/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
