package redislock

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/lockcore/internal/realpath"
)

// storeOf names the Redis that rdb talks to, for the family's held set
// (lockcore.Entry.Store): a lock is its key (the prefix and the name) on
// that Redis. It is the client's address and logical database (a Cluster's
// seed addresses; a Ring's shards, each name with its address, since a
// key's shard is chosen by name), so two clients that reach one server by
// different addresses (a Unix socket and TCP, two host names) count as two
// servers (a socket's path is resolved: realpath.Of). A client whose
// options name no server is known by the client itself: a Sentinel
// client, a Cluster client fed by ClusterSlots (as NewFailoverClusterClient
// makes).
func storeOf(rdb redis.UniversalClient) string {
	switch c := rdb.(type) {
	case *redis.Client:
		o := c.Options()
		if o.Addr == "FailoverClient" { // go-redis's placeholder for a Sentinel client
			return fmt.Sprintf("sentinel:%p/%d", c, o.DB)
		}
		network, addr := cmp.Or(o.Network, "tcp"), o.Addr
		if network == "unix" {
			addr = realpath.Of(addr)
		}
		return fmt.Sprintf("%s:%s/%d", network, addr, o.DB)
	case *redis.ClusterClient:
		if len(c.Options().Addrs) == 0 {
			return fmt.Sprintf("cluster:%p", c)
		}
		return "cluster:" + strings.Join(slices.Sorted(slices.Values(c.Options().Addrs)), ",")
	case *redis.Ring:
		o := c.Options()
		shards := make([]string, 0, len(o.Addrs))
		for name, addr := range o.Addrs {
			shards = append(shards, name+"="+addr)
		}
		slices.Sort(shards)
		return fmt.Sprintf("ring:%s/%d", strings.Join(shards, ","), o.DB)
	}
	return fmt.Sprintf("%T:%p", rdb, rdb)
}
