package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/source/pgsource"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// getDoc requests the lock table and decodes it.
func getDoc(t *testing.T, url string) (int, httpapi.Document, string) {
	t.Helper()
	code, _, body := get(t, url+"/api/advisory-locks")
	var doc httpapi.Document
	if code == http.StatusOK {
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Fatalf("%s: %v", body, err)
		}
	}
	return code, doc, string(body)
}

// While the database hangs, /api/advisory-locks answers from the newest
// snapshot, marked stale with its age and the reason, instead of waiting
// for a poll that cannot finish; once the database answers again the
// answer is fresh.
func TestAdvisoryLocksWhileDatabaseHangs(t *testing.T) {
	p := pgtest.NewProxy(t, pgtest.DSN(t))
	mon, err := pgsource.Connect(context.Background(), p.DSN(), pgsource.Options{StatementTimeout: 2 * time.Second}) // 500ms risked the fresh poll on a loaded CI box, as pgsource's silent-server test met
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	defer p.Thaw() // before Close, which waits for a stuck connection
	hold(t, pgtest.DSN(t), 1, 9696, "stale-test")
	latest := httpapi.NewLatest(mon.Poll, 100*time.Millisecond)
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, Info: mon.Info}))
	defer srv.Close()

	code, doc, body := getDoc(t, srv.URL)
	if code != http.StatusOK || doc.Stale || !hasKey(doc, "AGENT 9696") {
		t.Fatalf("fresh: %d %s", code, body)
	}
	p.Freeze()
	var stale httpapi.Document
	pgtest.Eventually(t, "a stale answer", func() bool {
		code, doc, body := getDoc(t, srv.URL)
		if code != http.StatusOK {
			t.Fatalf("while the database hangs: %d %s, want 200 from the newest snapshot", code, body)
		}
		stale = doc
		return doc.Stale
	})
	if stale.Age <= 0 || stale.StaleReason == "" || !hasKey(stale, "AGENT 9696") {
		t.Errorf("stale answer: age %v, reason %q, locks %+v", stale.Age, stale.StaleReason, stale.Locks)
	}
	p.Thaw()
	pgtest.Eventually(t, "a fresh answer after the database is back", func() bool {
		_, doc, _ := getDoc(t, srv.URL)
		return !doc.Stale && doc.Age >= 0
	})
}

// With no snapshot to fall back on, a hung database is a 503 after the
// short wait, not a request held for the whole poll.
func TestAdvisoryLocksHungWithoutSnapshot(t *testing.T) {
	p := pgtest.NewProxy(t, pgtest.DSN(t))
	mon, err := pgsource.Connect(context.Background(), p.DSN(), pgsource.Options{StatementTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer mon.Close()
	defer p.Thaw()
	p.Freeze()
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: httpapi.NewLatest(mon.Poll, time.Second), Info: mon.Info}))
	defer srv.Close()
	code, _, body := getDoc(t, srv.URL)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "did not answer within") {
		t.Errorf("%d %s", code, body)
	}
}

func hasKey(doc httpapi.Document, key string) bool {
	for _, l := range doc.Locks {
		if l.Key == key {
			return true
		}
	}
	return false
}
