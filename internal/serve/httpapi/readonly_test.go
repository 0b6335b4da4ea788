package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// No endpoint changes anything: every path answers GET (and HEAD) only,
// and any other method gets 405 before a handler runs.
func TestEndpointsReadOnly(t *testing.T) {
	latest := httpapi.NewLatest(nil, time.Hour)
	latest.Put(model.Snapshot{Taken: time.Unix(1_800_000_000, 0)})
	h := httpapi.New(httpapi.Deps{
		Latest:    latest,
		Health:    func(context.Context) error { return nil },
		Metrics:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}),
		LockOrder: lockcore.NewOrderGraph().Handler(),
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, path := range []string{"/", "/api/locks", "/api/advisory-locks", "/healthz", "/metrics", "/debug/lockorder"} {
		for _, method := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("%s %s: %d, want 405", method, path, resp.StatusCode)
			}
		}
	}
}
