package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/locktop/locktop/internal/serve/httpapi"
)

// readmeSection returns the README's section under the heading title, up
// to the next heading of the same level or above.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+title+"\n")
	if i < 0 {
		t.Fatalf("README has no section %q", title)
	}
	s = s[i+len(title)+2:]
	level := strings.Count(strings.Fields(title)[0], "#")
	for _, l := range regexp.MustCompile(`(?m)^#+ `).FindAllStringIndex(s, -1) {
		if l[1]-l[0]-1 <= level {
			return s[:l[0]]
		}
	}
	return s
}

// codeNames are the distinct first submatches of re in the non-test Go
// files of dir.
func codeNames(t *testing.T, dir string, re *regexp.Regexp) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out
}

// sameNames reports what is in code but not in the README, and the
// other way round.
func sameNames(t *testing.T, what string, code, readme []string) {
	t.Helper()
	for _, n := range code {
		if !slices.Contains(readme, n) {
			t.Errorf("%s %s is in the code but not in the README", what, n)
		}
	}
	for _, n := range readme {
		if !slices.Contains(code, n) {
			t.Errorf("%s %s is in the README but not in the code", what, n)
		}
	}
}

// The README's endpoints and metrics are the code's: every route the
// HTTP handler registers is a row of the endpoint table, every metric the
// metrics package defines is named in the metric table, and the /healthz
// row names every field of its body.
func TestReadmeEndpointsAndMetrics(t *testing.T) {
	sec := readmeSection(t, "## Monitoring")
	var rows []string
	for _, l := range strings.Split(sec, "\n") {
		if strings.HasPrefix(l, "| ") {
			rows = append(rows, l)
		}
	}
	var endpoints, metricNames []string
	healthRow := ""
	for _, r := range rows {
		if m := regexp.MustCompile("^\\| `GET (/[^`]*)`").FindStringSubmatch(r); m != nil {
			endpoints = append(endpoints, m[1])
			if m[1] == "/healthz" {
				healthRow = r
			}
			continue
		}
		cells := strings.Split(r, "|")
		if len(cells) > 1 {
			for _, m := range regexp.MustCompile("`(locktop_[a-z_]+)`").FindAllStringSubmatch(cells[1], -1) {
				metricNames = append(metricNames, m[1])
			}
		}
	}
	slices.Sort(endpoints)
	slices.Sort(metricNames)
	routes := codeNames(t, "../serve/httpapi", regexp.MustCompile(`Handle(?:Func)?\("GET (/[a-z/-]+)"`))
	sameNames(t, "endpoint", routes, endpoints)
	sameNames(t, "metric", codeNames(t, "../serve/metrics", regexp.MustCompile(`"(locktop_[a-z_]+)"`)), metricNames)

	h := reflect.TypeOf(httpapi.Health{})
	for i := range h.NumField() {
		name, _, _ := strings.Cut(h.Field(i).Tag.Get("json"), ",")
		if !strings.Contains(healthRow, `"`+name+`"`) {
			t.Errorf("the README's /healthz row does not name the body's field %q: %s", name, healthRow)
		}
	}
}
