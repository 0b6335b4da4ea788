package redisserver

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/scratch"
)

// Cluster is a running throw-away Redis Cluster of masters without
// replicas, each on a loopback TCP port, the hash slots split evenly.
type Cluster struct {
	root  string
	addrs []string
	procs []*process
}

// clusterSize is the number of masters: the smallest cluster in which a
// script's keys can land on different nodes.
const clusterSize = 3

// StartCluster starts a three-master cluster on free loopback ports and
// waits until every node reports cluster_state:ok. The caller must call
// Stop.
func StartCluster(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	pids := make([]string, clusterSize)
	for i := range pids {
		pids[i] = filepath.Join(nodeDir(i), "redis.pid")
	}
	root, err := scratch.New(tempBase(), clusterPrefix, pids...)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	c := &Cluster{root: root}
	ok := false
	defer func() {
		if !ok {
			_ = c.Stop()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, startTimeout(opts.StartTimeout))
	defer cancel()
	// A port found free may be taken before the server binds it: then the
	// node exits at once, and we try other ports.
	for attempt := 0; ; attempt++ {
		err = c.launch(ctx, bin, opts.Args)
		if err == nil {
			break
		}
		for _, p := range c.procs {
			p.shutdown()
		}
		c.procs, c.addrs = nil, nil
		if attempt == 4 || ctx.Err() != nil {
			return nil, err
		}
	}
	if err := c.form(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

func nodeDir(i int) string { return "node-" + strconv.Itoa(i) }

// launch starts the nodes, each on a port p whose cluster bus port p+10000
// is free too.
func (c *Cluster) launch(ctx context.Context, bin string, extra []string) error {
	for i := range clusterSize {
		port, err := freePort()
		if err != nil {
			return err
		}
		dir := filepath.Join(c.root, nodeDir(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("redisserver: %w", err)
		}
		args := append([]string{bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
			"--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "redis.log"), "--pidfile", filepath.Join(dir, "redis.pid"),
			"--daemonize", "no",
		}, extra...)
		p, err := spawn(dir, filepath.Join(dir, "redis.log"), args)
		if err != nil {
			return err
		}
		c.procs = append(c.procs, p)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		c.addrs = append(c.addrs, addr)
		if err := p.waitReady(ctx, &redis.Options{Addr: addr}); err != nil {
			return err
		}
	}
	return nil
}

// form gives each node a distinct config epoch and a third of the slots,
// introduces them to each other, and waits until all agree the cluster is
// up: what `redis-cli --cluster create` does, without its prompts.
func (c *Cluster) form(ctx context.Context) error {
	clients := make([]*redis.Client, len(c.addrs))
	for i, a := range c.addrs {
		clients[i] = redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, PoolSize: 1})
		defer clients[i].Close()
	}
	per := 16384 / len(clients)
	for i, cl := range clients {
		lo, hi := i*per, (i+1)*per-1
		if i == len(clients)-1 {
			hi = 16383
		}
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("redisserver: cluster set-config-epoch on %s: %w", c.addrs[i], err)
		}
		if err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("redisserver: cluster addslotsrange on %s: %w", c.addrs[i], err)
		}
	}
	for _, a := range c.addrs[1:] {
		host, port, _ := net.SplitHostPort(a)
		if err := clients[0].ClusterMeet(ctx, host, port).Err(); err != nil {
			return fmt.Errorf("redisserver: cluster meet %s: %w", a, err)
		}
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last string
	for {
		up := 0
		for _, cl := range clients {
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil {
				last = err.Error()
				continue
			}
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(clients))) {
				up++
			} else {
				last = strings.ReplaceAll(strings.TrimSpace(info), "\r\n", " ")
			}
		}
		if up == len(clients) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redisserver: cluster not up: %w (%s)", ctx.Err(), last)
		case <-tick.C:
		}
	}
}

// Addrs returns the masters' host:port addresses, for redis.ClusterOptions.
func (c *Cluster) Addrs() []string { return append([]string(nil), c.addrs...) }

// StopNode ends node i (of Addrs) and keeps the others running, as a
// primary that dies: the tests of clients that must say which node is
// missing.
func (c *Cluster) StopNode(i int) {
	if i >= 0 && i < len(c.procs) {
		c.procs[i].shutdown()
	}
}

// Dir returns the cluster's temporary directory.
func (c *Cluster) Dir() string { return c.root }

// Stop ends every node and deletes the cluster's directory. It is safe to
// call more than once.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	for _, p := range c.procs {
		p.shutdown()
	}
	if c.root == "" {
		return nil
	}
	if err := os.RemoveAll(c.root); err != nil {
		return fmt.Errorf("redisserver: removing %s: %w", c.root, err)
	}
	c.root = ""
	return nil
}

// freePort returns a loopback port p such that p and its cluster bus port
// p+10000 were both free a moment ago.
func freePort() (int, error) {
	for range 100 {
		p := 20000 + rand.IntN(25000)
		l1, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		l1.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return p, nil
	}
	return 0, errors.New("redisserver: no free loopback port pair for a cluster node")
}
