package lockcore

import (
	"net"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// KeepAlive replaces DefaultKeepAlive as what lock connections get
// (setKeepAlive, tested in internal_test.go, applies it to each).
func TestKeepAliveOption(t *testing.T) {
	k := net.KeepAliveConfig{Enable: true, Idle: 9 * time.Second, Interval: 2 * time.Second, Count: 3}
	if s := New(pgtest.Pool(t, nil), KeepAlive(k)); s.keepAlive != k {
		t.Errorf("keepAlive %+v, want %+v", s.keepAlive, k)
	}
	if s := New(pgtest.Pool(t, nil)); s.keepAlive != DefaultKeepAlive {
		t.Errorf("default keepAlive %+v, want DefaultKeepAlive", s.keepAlive)
	}
}
