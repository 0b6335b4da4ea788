package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/model"
)

// everyKind is a merged snapshot with one holder and one waiter of each
// kind, from three sources (a fourth failed), the Redis one on a clock half
// a second ahead.
func everyKind() model.Snapshot {
	t0 := time.Unix(1_800_000_000, 0).UTC()
	rt := t0.Add(500 * time.Millisecond)
	pg := model.Snapshot{Taken: t0, Connections: 7, Locks: []model.Lock{
		{Kind: model.KindAdvisory, PID: 10, Database: "app", Namespace: "AGENT", EntityID: 7, Pair: true, Mode: model.ModeExclusive, Granted: true, HeldSince: t0.Add(-4 * time.Second)},
		{Kind: model.KindAdvisory, PID: 11, Database: "app", Namespace: "AGENT", EntityID: 7, Pair: true, Mode: model.ModeExclusive, QueuePos: 1, WaitStart: t0.Add(-time.Second), BlockedBy: []int32{10}},
		{Kind: model.KindRow, PID: 20, Database: "app", LockType: "transactionid", Relation: "public.turns", Row: "(0,3)", Mode: "ExclusiveLock", Granted: true},
		{Kind: model.KindRow, PID: 21, Database: "app", LockType: "transactionid", Relation: "public.turns", Row: "(0,3)", Mode: "ShareLock", QueuePos: 1, WaitStart: t0.Add(-13 * time.Minute), BlockedBy: []int32{20}, Backend: &model.Backend{ApplicationName: "summariser"}},
		{Kind: model.KindRelation, PID: 30, Database: "app", LockType: "relation", Relation: "public.agents", Mode: "AccessShareLock", Granted: true},
		{Kind: model.KindRelation, PID: 31, Database: "app", LockType: "relation", Relation: "public.agents", Mode: "AccessExclusiveLock", QueuePos: 1, WaitStart: t0.Add(-2 * time.Second), BlockedBy: []int32{30}},
	}}
	redis := model.Snapshot{Taken: rt, Locks: []model.Lock{
		{Kind: model.KindRedis, Name: "sesslock:t1:a1:c1:web", Namespace: "SESSION", Owner: "brain-1", Token: "a1b2c3", Fence: 42, Mode: "exclusive", Granted: true, HeldSince: rt.Add(-5 * time.Second), Expires: rt.Add(25 * time.Second)},
		{Kind: model.KindRedis, Name: "sesslock:t1:a1:c1:web", Namespace: "SESSION", Owner: "brain-2", Token: "d4e5f6", Mode: "exclusive", QueuePos: 1, WaitStart: rt.Add(-3 * time.Second), BlockedByOwners: []string{"brain-1"}},
	}}
	lease := model.Snapshot{Taken: t0, Locks: []model.Lock{
		{Kind: model.KindLease, Name: "map:m1", Namespace: "MAP", Owner: "job:9", Fence: 5, Mode: "write", Granted: true, HeldSince: t0.Add(-time.Minute), Expires: t0.Add(-2 * time.Second), Heartbeat: t0.Add(-40 * time.Second), Stale: true},
		{Kind: model.KindLease, Name: "map:m1", Namespace: "MAP", Owner: "job:10", Mode: "read", QueuePos: 1, WaitStart: t0.Add(-8 * time.Second), Expires: t0.Add(20 * time.Second), BlockedByOwners: []string{"job:9"}},
	}, Audit: []model.Audit{{Name: "map:m1", Actor: "job:10", Reason: "lease expired", VictimOwner: "job:8", At: t0.Add(-time.Hour)}}}
	return model.Merge([]model.Part{
		{Name: "postgres", Snapshot: pg},
		{Name: "redis", Snapshot: redis},
		{Name: "lease", Snapshot: lease},
		{Name: "lease-sqlite", Err: errors.New("unable to open database file")},
	})
}

// GET /api/locks: every kind in one list, each with the fields that apply
// to it (no pid, database or query for Redis and lease rows; no owner or
// fence for PostgreSQL ones), durations at each source's own clock, and
// every source's status.
func TestLocksEndpointPerKind(t *testing.T) {
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(everyKind())
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest}))
	defer srv.Close()
	body := getBody(t, srv.URL+"/api/locks", http.StatusOK)

	var doc struct {
		Total   int                 `json:"total"`
		Waiting int                 `json:"waiting"`
		Kinds   []httpapi.KindCount `json:"kinds"`
		Sources []httpapi.SourceDoc `json:"sources"`
		Locks   []map[string]any    `json:"locks"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Total != 10 || doc.Waiting != 5 || len(doc.Kinds) != 5 || doc.Kinds[1].Kind != "row" || doc.Kinds[1].Waiting != 1 {
		t.Fatalf("document header %+v", doc)
	}
	if len(doc.Sources) != 4 || !doc.Sources[1].OK || doc.Sources[3].OK || doc.Sources[3].Error != "unable to open database file" || doc.Sources[1].Locks != 2 {
		t.Errorf("sources %+v", doc.Sources)
	}
	byKey := func(kind, key string, granted bool) map[string]any {
		for _, l := range doc.Locks {
			if l["kind"] == kind && l["key"] == key && l["granted"] == granted {
				return l
			}
		}
		t.Fatalf("no %s %s (granted %v) in %s", kind, key, granted, body)
		return nil
	}
	absent := func(l map[string]any, fields ...string) {
		t.Helper()
		for _, f := range fields {
			if _, ok := l[f]; ok {
				t.Errorf("%s %s has %s: %v", l["kind"], l["key"], f, l[f])
			}
		}
	}

	adv := byKey("advisory", "AGENT 7", false)
	if adv["pid"] != 11.0 || adv["entity_id"] != 7.0 || adv["waited"] != 1.0 || adv["source"] != "postgres" || adv["namespace"] != "AGENT" {
		t.Errorf("advisory waiter %v", adv)
	}
	absent(adv, "owner", "fence", "expires", "left", "holder", "relation")

	row := byKey("row", "public.turns row (0,3)", false)
	if row["pid"] != 21.0 || row["relation"] != "public.turns" || row["row"] != "(0,3)" || row["waited"] != 780.0 ||
		row["lock_type"] != "transactionid" || row["application_name"] != "summariser" {
		t.Errorf("row waiter %v", row)
	}
	if bb, _ := row["blocked_by"].([]any); len(bb) != 1 || bb[0] != 20.0 {
		t.Errorf("row waiter blocked by %v", row["blocked_by"])
	}
	absent(row, "owner", "fence", "entity_id")
	if rel := byKey("relation", "public.agents", true); rel["holder"] != "30" || rel["mode"] != "AccessShareLock" {
		t.Errorf("relation holder %v", rel)
	}

	rh := byKey("redis", "sesslock:t1:a1:c1:web", true)
	if rh["owner"] != "brain-1" || rh["holder"] != "brain-1" || rh["fence"] != 42.0 || rh["left"] != 25.0 || rh["held"] != 5.0 ||
		rh["token_prefix"] != "a1b2c3" || rh["namespace"] != "SESSION" || rh["source"] != "redis" {
		t.Errorf("redis holder %v (times at Redis's own clock)", rh)
	}
	absent(rh, "pid", "database", "query", "entity_id", "stale", "heartbeat")
	rw := byKey("redis", "sesslock:t1:a1:c1:web", false)
	if rw["waited"] != 3.0 || rw["queue_position"] != 1.0 {
		t.Errorf("redis waiter %v", rw)
	}
	if bo, _ := rw["blocked_by_owners"].([]any); len(bo) != 1 || bo[0] != "brain-1" {
		t.Errorf("redis waiter blocked by %v", rw["blocked_by_owners"])
	}
	absent(rw, "pid", "fence", "holder")

	lh := byKey("lease", "map:m1", true)
	if lh["stale"] != true || lh["left"] != -2.0 || lh["heartbeat_age"] != 40.0 || lh["fence"] != 5.0 || lh["mode"] != "write" {
		t.Errorf("lease holder %v", lh)
	}
	absent(lh, "pid", "database", "application_name")

	// The advisory document of the same snapshot is seed 000's: advisory
	// rows only.
	var adoc httpapi.Document
	if err := json.Unmarshal(getBody(t, srv.URL+"/api/advisory-locks", http.StatusOK), &adoc); err != nil {
		t.Fatal(err)
	}
	if adoc.Total != 2 || adoc.Held != 1 || adoc.Waiting != 1 {
		t.Errorf("advisory document: %d rows, %d held, %d waiting", adoc.Total, adoc.Held, adoc.Waiting)
	}
}

// /healthz reports each source of the newest snapshot; a failing source
// beside PostgreSQL degrades the status but keeps 200, since the monitor
// works and that source alone is missing.
func TestHealthReportsSources(t *testing.T) {
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(everyKind())
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Health: func(context.Context) error { return nil }}))
	defer srv.Close()
	var h httpapi.Health
	if err := json.Unmarshal(getBody(t, srv.URL+"/healthz", http.StatusOK), &h); err != nil {
		t.Fatal(err)
	}
	if h.Status != "degraded" || h.Reason != "lease-sqlite: unable to open database file" || len(h.Sources) != 4 || !h.Sources[0].OK {
		t.Errorf("health %+v", h)
	}
}

func getBody(t *testing.T, url string, code int) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != code {
		t.Fatalf("GET %s: %d, want %d: %s", url, resp.StatusCode, code, body)
	}
	return body
}
