package connect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// ErrRedisURL is a Redis URL that cannot be used.
var ErrRedisURL = errors.New("bad Redis URL")

// RedisKind is how a Redis URL names its Redis.
type RedisKind int

// The kinds.
const (
	// RedisNode is one address (redis://, rediss://, unix://): a single
	// Redis, or a Cluster node when the server says cluster_enabled:1.
	RedisNode RedisKind = iota
	// RedisCluster is several seed addresses, go-redis's cluster URL form:
	// redis://host1:port?addr=host2:port&addr=host3:port.
	RedisCluster
	// RedisSentinel is Sentinel-managed primaries: master_name=NAME in the
	// query, the host (and any addr=) the Sentinels.
	RedisSentinel
)

// RedisTarget is a parsed Redis URL. Its Client makes the client.
type RedisTarget struct {
	Kind     RedisKind
	node     *redis.Options
	cluster  *redis.ClusterOptions
	failover *redis.FailoverOptions
}

// RedisTuning is what a caller sets on every kind of client alike.
type RedisTuning struct {
	ClientName string // CLIENT SETNAME, unless the URL sets client_name
	PoolSize   int    // per node; 0: go-redis's default, unless the URL sets pool_size
	// MaxRetries: 0 is go-redis's default (3), -1 no retries (a monitor's
	// poll is retried by the next poll).
	MaxRetries int
}

// ParseRedis parses a --redis URL: redis://[user:pass@]host:port[/db],
// rediss://… (TLS) or unix:///path/redis.sock names one Redis;
// redis://host1:port?addr=host2:port&addr=host3:port names a Cluster by
// several seeds; ?master_name=NAME names Sentinel-managed primaries (the
// host and any addr= being the Sentinels). The query takes go-redis's
// option names (dial_timeout=2s, pool_size=…). The error never shows the
// password.
func ParseRedis(u string) (*RedisTarget, error) {
	q := url.Values{}
	if pu, err := url.Parse(u); err == nil {
		q = pu.Query()
	}
	t := &RedisTarget{}
	var err error
	switch {
	case q.Has("master_name"):
		t.Kind = RedisSentinel
		t.failover, err = redis.ParseFailoverURL(u)
	case q.Has("addr"):
		t.Kind = RedisCluster
		t.cluster, err = redis.ParseClusterURL(u)
	default:
		t.node, err = redis.ParseURL(u)
	}
	if err != nil {
		// go-redis quotes the URL in some errors: never show a password.
		return nil, fmt.Errorf("%w: %s", ErrRedisURL, RedactRedisURL(err.Error(), u))
	}
	return t, nil
}

// Redis makes the client for the Redis that url names (ParseRedis): one
// function for every command, so the monitor's source, serve, record, the
// simulator and the demo reach a Redis the same way. A single address is
// asked once (INFO cluster, within ctx) whether it is a Cluster node: then
// the client is a *redis.ClusterClient seeded with it, which reads and
// writes every primary. A Redis that does not answer is an error.
func Redis(ctx context.Context, url string, tune RedisTuning) (redis.UniversalClient, error) {
	t, err := ParseRedis(url)
	if err != nil {
		return nil, err
	}
	return t.Client(ctx, tune)
}

// Client makes the target's client; see Redis. Every client has
// ContextTimeoutEnabled: a Redis that hangs ends a command at its
// context's deadline.
func (t *RedisTarget) Client(ctx context.Context, tune RedisTuning) (redis.UniversalClient, error) {
	switch t.Kind {
	case RedisCluster:
		o := *t.cluster
		o.ContextTimeoutEnabled = true
		o.ClientName = cmp.Or(o.ClientName, tune.ClientName)
		o.PoolSize = cmp.Or(o.PoolSize, tune.PoolSize)
		o.MaxRetries = cmp.Or(o.MaxRetries, tune.MaxRetries)
		return redis.NewClusterClient(&o), nil
	case RedisSentinel:
		o := *t.failover
		o.ContextTimeoutEnabled = true
		o.ClientName = cmp.Or(o.ClientName, tune.ClientName)
		o.PoolSize = cmp.Or(o.PoolSize, tune.PoolSize)
		o.MaxRetries = cmp.Or(o.MaxRetries, tune.MaxRetries)
		return redis.NewFailoverClient(&o), nil
	}
	o := *t.node
	o.ContextTimeoutEnabled = true
	o.ClientName = cmp.Or(o.ClientName, tune.ClientName)
	o.PoolSize = cmp.Or(o.PoolSize, tune.PoolSize)
	o.MaxRetries = cmp.Or(o.MaxRetries, tune.MaxRetries)
	c := redis.NewClient(&o)
	clustered, err := isCluster(ctx, c)
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	if !clustered {
		return c, nil
	}
	_ = c.Close()
	if o.Network == "unix" {
		return nil, fmt.Errorf("%w: %s is a Cluster node: name it by host:port (a Cluster's nodes redirect clients to TCP addresses)", ErrRedisURL, o.Addr)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: []string{o.Addr}, ClientName: o.ClientName, Protocol: o.Protocol,
		Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
		MaxRetries: o.MaxRetries, DialTimeout: o.DialTimeout, ReadTimeout: o.ReadTimeout, WriteTimeout: o.WriteTimeout,
		ContextTimeoutEnabled: true, PoolSize: o.PoolSize, MinIdleConns: o.MinIdleConns, MaxIdleConns: o.MaxIdleConns,
	}), nil
}

// isCluster asks a node whether it runs in Cluster mode. A server that
// refuses INFO (an ACL without it) is taken as a single Redis.
func isCluster(ctx context.Context, c *redis.Client) (bool, error) {
	info, err := c.Info(ctx, "cluster").Result()
	if err != nil {
		var re redis.Error
		if errors.As(err, &re) && !strings.HasPrefix(re.Error(), "LOADING") {
			return false, nil // the server answered, refusing: not a way to tell
		}
		return false, err
	}
	return strings.Contains(info, "cluster_enabled:1"), nil
}

// RedactRedisURL removes url's password from s.
func RedactRedisURL(s, url string) string {
	if at := strings.LastIndexByte(url, '@'); at > 0 {
		if colon := strings.LastIndexByte(url[:at], ':'); colon > 0 && !strings.HasSuffix(url[:colon], "/") {
			if pw := url[colon+1 : at]; pw != "" {
				s = strings.ReplaceAll(s, pw, "***")
			}
		}
	}
	return s
}
