package httpapi_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// /debug/lockorder serves the lock family's order graph it is given.
func TestLockOrderEndpoint(t *testing.T) {
	g := lockcore.NewOrderGraph()
	g.DeclareOrder("AGENT", "SESSION")
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(model.Snapshot{Taken: time.Unix(1_800_000_000, 0)})
	rec := httptest.NewRecorder()
	httpapi.New(httpapi.Deps{Latest: latest, LockOrder: g.Handler()}).ServeHTTP(rec, httptest.NewRequest("GET", "/debug/lockorder", nil))
	var body struct{ Edges []lockcore.Edge }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != 200 {
		t.Fatalf("%d %s: %v", rec.Code, rec.Body, err)
	}
	if len(body.Edges) != 1 || body.Edges[0].From != "AGENT" || body.Edges[0].To != "SESSION" {
		t.Errorf("edges %+v, want AGENT -> SESSION", body.Edges)
	}
}
