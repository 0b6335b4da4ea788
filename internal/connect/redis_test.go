package connect_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/connect"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// Each form of URL names its kind; a bad one says so without its password.
func TestParseRedis(t *testing.T) {
	for _, tc := range []struct {
		url  string
		kind connect.RedisKind
	}{
		{"redis://localhost:6379/0", connect.RedisNode},
		{"unix:///run/redis.sock", connect.RedisNode},
		{"redis://h1:7000?addr=h2:7000&addr=h3:7000", connect.RedisCluster},
		{"redis://s1:26379?master_name=main&addr=s2:26379", connect.RedisSentinel},
	} {
		tg, err := connect.ParseRedis(tc.url)
		if err != nil || tg.Kind != tc.kind {
			t.Errorf("ParseRedis(%q) = %+v, %v; want kind %d", tc.url, tg, err, tc.kind)
		}
	}
	for _, bad := range []string{"redis://u:s3cret@[bad", "http://h:1", "redis://u:s3cret@h:1?addr=nocolon", "redis://h:1/0?nosuch=1"} {
		_, err := connect.ParseRedis(bad)
		if !errors.Is(err, connect.ErrRedisURL) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseRedis(%q) = %v", bad, err)
		}
	}
}

// A single node's URL gives a plain client, a Cluster node's a Cluster
// client (the server says cluster_enabled:1); a Redis that does not
// answer is an error.
func TestRedisFindsCluster(t *testing.T) {
	ctx := context.Background()
	c, err := connect.Redis(ctx, redistest.Private(t).URL(), connect.RedisTuning{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*redis.Client); !ok {
		t.Errorf("single Redis: a %T", c)
	}
	cl := redistest.PrivateCluster(t)
	cc, err := connect.Redis(ctx, "redis://"+cl.Addrs()[0], connect.RedisTuning{ClientName: "t"})
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	if _, ok := cc.(*redis.ClusterClient); !ok {
		t.Fatalf("Cluster node: a %T", cc)
	}
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} { // on every node: no MOVED
		if err := cc.Set(ctx, k, 1, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := connect.Redis(ctx, "unix:///nonexistent-locktop/redis.sock", connect.RedisTuning{}); err == nil {
		t.Error("a Redis that is not there: no error")
	}
}
