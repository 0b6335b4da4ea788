package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/querytext"
	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/model"
)

// /api/locks and /api/advisory-locks carry each session's query as the
// handler's QueryText mode lets it out; the snapshot the poll loop keeps
// (and the screen shows) is not changed.
func TestQueryTextInDocuments(t *testing.T) {
	const query = "SELECT * FROM users WHERE email = 'a@b.c'"
	snap := model.Snapshot{Taken: time.Unix(1_800_000_000, 0).UTC(), Locks: []model.Lock{
		{Kind: model.KindAdvisory, PID: 10, Database: "app", Namespace: "AGENT", EntityID: 7, Pair: true, Mode: model.ModeExclusive, Granted: true, Backend: &model.Backend{Query: query}},
	}}
	for _, tc := range []struct {
		mode       querytext.Mode
		want, deny string
	}{
		{querytext.Full, "a@b.c", ""},
		{querytext.Normalized, `WHERE email = $1`, "a@b.c"},
		{querytext.None, "", "email"},
	} {
		latest := httpapi.NewLatest(nil, time.Hour)
		latest.Put(snap)
		srv := httptest.NewServer(httpapi.New(httpapi.Deps{Latest: latest, QueryText: tc.mode}))
		for _, path := range []string{"/api/locks", "/api/advisory-locks"} {
			body := string(getBody(t, srv.URL+path, http.StatusOK))
			if tc.want != "" && !strings.Contains(body, tc.want) {
				t.Errorf("%v %s: %s lacks %q", tc.mode, path, body, tc.want)
			}
			if tc.deny != "" && strings.Contains(body, tc.deny) {
				t.Errorf("%v %s: %s shows %q", tc.mode, path, body, tc.deny)
			}
		}
		srv.Close()
		if n, _ := latest.Newest(); n.Locks[0].Session().Query != query {
			t.Fatalf("%v: the kept snapshot's query became %q", tc.mode, n.Locks[0].Session().Query)
		}
	}
}
