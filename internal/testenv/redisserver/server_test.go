package redisserver

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestStartServeStop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	dir := s.Dir()
	defer s.Stop()

	opt, err := redis.ParseURL(s.URL())
	if err != nil {
		t.Fatalf("ParseURL(%q): %v", s.URL(), err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	for name, want := range map[string]string{"port": "0", "save": "", "appendonly": "no", "unixsocket": s.Socket()} {
		got, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v", name, err)
		}
		if got[name] != want {
			t.Errorf("%s = %q, want %q", name, got[name], want)
		}
	}
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}

	if err := s.Restart(ctx); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Errorf("after Restart: EXISTS k = %d, %v; want an empty server", n, err)
	}

	s.Halt()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Error("PING answered while the server is halted")
	}
	if err := s.Resume(ctx); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	if err := c.Ping(ctx).Err(); err != nil {
		t.Errorf("PING after Resume: %v", err)
	}

	if err := s.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if s.Running() {
		t.Error("server still running after Stop")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s still there after Stop (stat: %v)", dir, err)
	}
	if err := s.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestBadDirectiveSaysWhy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := Start(ctx, Options{Args: []string{"--no-such-directive", "1"}})
	if err == nil {
		s.Stop()
		t.Fatal("Start with a bad directive succeeded")
	}
	if want := "no-such-directive"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not quote the server's complaint (%q)", err, want)
	}
}

func TestCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartCluster(ctx, Options{})
	if err != nil {
		t.Fatalf("StartCluster: %v", err)
	}
	dir := c.Dir()
	defer c.Stop()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	defer cc.Close()
	// Keys spread over the slots land on every master.
	for i := range 30 {
		if err := cc.Set(ctx, fmt.Sprint("k", i), i, 0).Err(); err != nil {
			t.Fatalf("SET through the cluster: %v", err)
		}
	}
	var masters atomic.Int32 // ForEachMaster calls fn concurrently
	err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if err == nil && n > 0 {
			masters.Add(1)
		}
		return err
	})
	if err != nil || masters.Load() != 3 {
		t.Errorf("keys on %d masters (%v), want 3", masters.Load(), err)
	}
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("directory %s still there after Stop (stat: %v)", dir, err)
	}
}
