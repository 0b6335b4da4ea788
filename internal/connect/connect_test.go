package connect_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/locktop/locktop/internal/connect"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestTimeoutFromDSN(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "")
	for _, tc := range []struct {
		dsn  string
		want time.Duration
	}{
		{"postgres://u@h/db", connect.DefaultTimeout},
		{"postgres://u@h/db?connect_timeout=12", 12 * time.Second},
		{"host=h connect_timeout=0", connect.DefaultTimeout}, // libpq's "forever" is not offered
		{"host=h connect_timeout=3", 3 * time.Second},
		{"postgres://u@h:notaport/db", connect.DefaultTimeout},
	} {
		if got := connect.Timeout(tc.dsn); got != tc.want {
			t.Errorf("Timeout(%q) = %v, want %v", tc.dsn, got, tc.want)
		}
	}
	cfg, err := connect.PoolConfig("host=h")
	if err != nil || cfg.ConnConfig.ConnectTimeout != connect.DefaultTimeout {
		t.Errorf("PoolConfig: %v, %v", cfg.ConnConfig.ConnectTimeout, err)
	}
	cc, err := connect.ConnConfig("host=h connect_timeout=7")
	if err != nil || cc.ConnectTimeout != 7*time.Second {
		t.Errorf("ConnConfig: %v, %v", cc.ConnectTimeout, err)
	}
	t.Setenv("PGCONNECT_TIMEOUT", "9")
	if got := connect.Timeout("host=h"); got != 9*time.Second {
		t.Errorf("PGCONNECT_TIMEOUT=9: %v", got)
	}
}

// A server that accepts the connection and never answers is given up on
// after the bound, even when the caller's context has no deadline: that is
// what kept `locktop sim --dsn` waiting past a minute.
func TestBoundedOnSilentServer(t *testing.T) {
	p := pgtest.NewProxy(t, pgtest.DSN(t))
	p.Freeze()
	defer p.Thaw()
	for _, tc := range []struct {
		name, dsn string
	}{
		{"connect_timeout=1", p.DSN() + "&connect_timeout=1"},
		{"default", p.DSN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := connect.PoolConfig(tc.dsn)
			if err != nil {
				t.Fatal(err)
			}
			pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			done := make(chan error, 1)
			go func() { done <- pool.Ping(context.Background()) }()
			select {
			case err := <-done:
				if err == nil {
					t.Fatal("a ping through a frozen proxy succeeded")
				}
			case <-time.After(30 * time.Second): // a hang guard, not a speed check
				t.Fatal("still connecting after 30s: the connect is not bounded")
			}
		})
	}
}
