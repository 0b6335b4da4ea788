package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
	"github.com/locktop/locktop/lockcore/redislock"
)

// Issue 29, as an operator tried it: a three-master Cluster holding 12
// session locks spread over the slots. snapshot --redis with one node's
// URL (or the seed list) lists all 12; acf runs on the Cluster with no
// errors; with one primary stopped, the snapshot names that node and lists
// the others' keys.
func TestRedisClusterEndToEnd(t *testing.T) {
	cl := redistest.PrivateCluster(t)
	addrs := cl.Addrs()
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true})
	defer cc.Close()
	locker := redislock.New(cc, redislock.Options{Owner: "e2e", TTL: 10 * time.Minute})
	defer locker.Close()

	// 12 keys, at least one on each node (node i holds a third of the slots).
	byNode := map[int][]string{}
	var keys []string
	for i := 0; len(keys) < 12 || len(byNode) < 3; i++ {
		k := redislock.SessionKey(fmt.Sprint("t", i), "a", "c", "web")
		slot, err := cc.ClusterKeySlot(ctx, redislock.DefaultPrefix+k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := locker.Acquire(ctx, k); err != nil {
			t.Fatal(err)
		}
		node := min(int(slot)/(16384/3), 2)
		byNode[node] = append(byNode[node], redislock.DefaultPrefix+k)
		keys = append(keys, redislock.DefaultPrefix+k)
	}

	one := "redis://" + addrs[0]
	seeds := "redis://" + addrs[0] + "?addr=" + addrs[1] + "&addr=" + addrs[2]
	for _, u := range []string{one, seeds} {
		doc, stderr := clusterSnapshot(t, u)
		if got := redisKeys(doc); !slices.Equal(got, sorted(keys)) {
			t.Errorf("--redis %s: listed %d keys %v, want the %d %v; stderr %q", u, len(got), got, len(keys), sorted(keys), stderr)
		}
		if src := redisSource(t, doc); !src.OK || len(src.Partial) != 0 || src.Truncated {
			t.Errorf("--redis %s: source %+v", u, src)
		}
	}

	// acf on the Cluster: no errors (a plain client got MOVED for 72% of them).
	path := filepath.Join(t.TempDir(), "acf.json")
	var stdout, stderr bytes.Buffer
	if code := run(simArgs(t, "--scenario", "acf", "--redis", one, "--duration", "3s", "--json", path), &stdout, &stderr); code != exitOK {
		t.Fatalf("acf on the Cluster: exit %d; stderr %q; stdout:\n%s", code, stderr.String(), stdout.String())
	}
	var rep struct {
		OK      bool                        `json:"ok"`
		Workers map[string]map[string]int64 `json:"workers"`
		Errors  struct {
			Errors int64 `json:"errors"`
		} `json:"errors"`
	}
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil || !rep.OK || rep.Errors.Errors != 0 || rep.Workers["turn"]["acquired"] == 0 {
		t.Errorf("acf on the Cluster: report ok %v, errors %d, turns %v (%v); stdout:\n%s", rep.OK, rep.Errors.Errors, rep.Workers["turn"], err, stdout.String())
	}

	// One primary stopped: its banner, the others' keys.
	cl.StopNode(1)
	doc, stderrText := clusterSnapshot(t, one)
	src := redisSource(t, doc)
	if !src.OK || len(src.Partial) != 1 || !strings.HasPrefix(src.Partial[0], addrs[1]+": ") {
		t.Errorf("node %s stopped: source %+v, want it named in partial", addrs[1], src)
	}
	if !strings.Contains(stderrText, addrs[1]) {
		t.Errorf("node %s stopped: stderr %q does not name it", addrs[1], stderrText)
	}
	// Only this test's keys are compared: a hold the acf run took in its
	// last moments may still be there until its TTL runs out.
	want := sorted(append(slices.Clone(byNode[0]), byNode[2]...))
	got := slices.DeleteFunc(redisKeys(doc), func(k string) bool { return !slices.Contains(keys, k) })
	if !slices.Equal(got, want) {
		t.Errorf("node %s stopped: listed %v, want the other nodes' %v", addrs[1], got, want)
	}
}

// clusterSnapshot runs snapshot --json --redis u.
func clusterSnapshot(t *testing.T, u string) (httpapi.LocksDocument, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run([]string{"snapshot", "--json", "--dsn", pgtest.DSN(t), "--redis", u}, &stdout, &stderr); code != exitOK {
		t.Fatalf("snapshot --redis %s: exit %d; stderr %q", u, code, stderr.String())
	}
	var doc httpapi.LocksDocument
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc, stderr.String()
}

func redisKeys(doc httpapi.LocksDocument) []string {
	var out []string
	for _, l := range doc.Locks {
		if l.Source == "redis" {
			out = append(out, l.Key)
		}
	}
	return sorted(out)
}

func redisSource(t *testing.T, doc httpapi.LocksDocument) httpapi.SourceDoc {
	t.Helper()
	for _, s := range doc.Sources {
		if s.Name == "redis" {
			return s
		}
	}
	t.Fatalf("no redis source in %+v", doc.Sources)
	return httpapi.SourceDoc{}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// A Redis that refuses most commands (an ACL without scripts: every lock
// command is one) makes a run fail though no invariant broke: exit 1, and
// the reason says which error and how often.
func TestSimRefusingRedisFails(t *testing.T) {
	rs := redistest.Private(t)
	c := redistest.ClientOf(t, rs)
	if err := c.Do(context.Background(), "ACL", "SETUSER", "default", "-eval", "-evalsha", "-fcall").Err(); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	// 4 s, not simArgs' 1.5 s: a loaded box made fewer than the three
	// errors a failed run needs in 1.5 s.
	code := run(simArgs(t, "--scenario", "acf", "--redis", rs.URL(), "--duration", "4s"), &stdout, &stderr)
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr %q; stdout:\n%s", code, exitFailure, stderr.String(), stdout.String())
	}
	for _, want := range []string{"failed with an error", "NOPERM"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr %q does not say %q", stderr.String(), want)
		}
	}
	if !strings.Contains(stdout.String(), "FAIL: ") || strings.Contains(stdout.String(), "OK: no invariant broken") {
		t.Errorf("report does not end in FAIL:\n%s", stdout.String())
	}
}
