package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v2"

	"github.com/locktop/locktop/internal/testenv/pgtest"
	"github.com/locktop/locktop/internal/testenv/redistest"
)

// deployDir holds what a fleet deployment loads: Prometheus rules and a
// Grafana dashboard (README, "Deploying at scale").
const deployDir = "../../deploy"

// prometheusMade are the series Prometheus makes itself for every scrape,
// which the rules may read beside the collector's own.
var prometheusMade = []string{"up"}

// The shipped alert rules pass promtool's check and their unit tests, and
// every metric the rules and the dashboard query is one that serve, run
// for real against a PostgreSQL with a waiter and a Redis, exposes at
// /metrics: a renamed metric breaks this test, not a dashboard nobody
// looks at until the night it is needed.
func TestDeployRulesAndDashboard(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is missing: install Debian's prometheus package (apt-get install -y prometheus; `make deps` does)")
	}
	rules, _ := filepath.Glob(filepath.Join(deployDir, "prometheus", "*.yml"))
	var ruleFiles, ruleTests []string
	for _, f := range rules {
		if strings.HasSuffix(f, "_test.yml") {
			ruleTests = append(ruleTests, f)
		} else {
			ruleFiles = append(ruleFiles, f)
		}
	}
	if len(ruleFiles) == 0 || len(ruleTests) == 0 {
		t.Fatalf("want rule files and their tests under %s/prometheus, have %v", deployDir, rules)
	}
	runTool(t, promtool, append([]string{"check", "rules"}, ruleFiles...)...)
	runTool(t, promtool, append([]string{"test", "rules"}, ruleTests...)...)

	queries := map[string][]string{} // file → its PromQL expressions
	for _, f := range ruleFiles {
		queries[f] = ruleExprs(t, f)
	}
	dash := filepath.Join(deployDir, "grafana", "locktop.json")
	exprs, byServer := dashboardExprs(t, dash)
	queries[dash] = exprs
	// The dashboard's queries are PromQL once Grafana's variables are
	// filled in: promtool checks them as recording rules.
	runTool(t, promtool, "check", "rules", asRules(t, exprs))
	if !byServer {
		t.Errorf("%s has no `server` variable", dash)
	}
	for _, e := range exprs {
		if !strings.Contains(e, `server=~"$server"`) {
			t.Errorf("%s: a query that ignores the server variable: %s", dash, e)
		}
	}

	served := servedMetrics(t)
	for f, list := range queries {
		if len(list) == 0 {
			t.Errorf("%s: no queries found", f)
		}
		for _, e := range list {
			names := promqlMetrics(e)
			if len(names) == 0 {
				t.Errorf("%s: no metric in %q", f, e)
			}
			for _, n := range names {
				if !slices.Contains(served, n) && !slices.Contains(prometheusMade, n) {
					t.Errorf("%s queries %s, which /metrics does not serve (in %q)", f, n, e)
				}
			}
		}
	}
}

// The metric names are read from PromQL as Prometheus would: not label
// names, functions, keywords, strings or Grafana's variables.
func TestPromqlMetrics(t *testing.T) {
	for expr, want := range map[string][]string{
		`sum by (server, kind) (increase(locktop_a_total{server=~"$server",x="by(y)"}[5m])) > 60`:               {"locktop_a_total"},
		"max by (server) (locktop_b{source=\"postgres\"}) == 0\nor\ntime() - max by (server) (c_seconds) > 120": {"locktop_b", "c_seconds"},
		`topk(10, sum without (instance) (rate(d[$__rate_interval] offset 1h)))`:                                {"d"},
		`up{job="locktop"} == 0 unless on (instance) e`:                                                         {"up", "e"},
		`histogram_quantile(0.99, sum by (le) (rate(f_bucket[${__range}])))`:                                    {"f_bucket"},
	} {
		if got := promqlMetrics(expr); !slices.Equal(got, want) {
			t.Errorf("promqlMetrics(%q) = %v, want %v", expr, got, want)
		}
	}
}

func runTool(t *testing.T, tool string, args ...string) {
	t.Helper()
	out, err := exec.Command(tool, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(tool), strings.Join(args, " "), err, out)
	}
}

// ruleExprs returns the expressions of a Prometheus rule file.
func ruleExprs(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []struct {
				Expr string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var out []string
	for _, g := range doc.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out
}

// dashboardExprs returns every panel query of a Grafana dashboard, and
// whether it has a `server` variable whose own query names a metric (that
// one is added to the queries). It fails t on a panel Grafana could not
// place: no type, no query target, or outside the 24-column grid.
func dashboardExprs(t *testing.T, path string) (exprs []string, byServer bool) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			Type    string `json:"type"`
			Title   string `json:"title"`
			GridPos struct{ H, W, X, Y int }
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&dash); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Errorf("%s: no title or uid", path)
	}
	for _, p := range dash.Panels {
		g := p.GridPos
		if p.Type == "" || g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("%s: panel %q: type %q at %+v", path, p.Title, p.Type, g)
		}
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("%s: panel %q has no query", path, p.Title)
		}
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*),\s*server\)$`)
	for _, v := range dash.Templating.List {
		if v.Name != "server" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		if m := labelValues.FindStringSubmatch(s); m != nil {
			byServer = true
			exprs = append(exprs, m[1]+`{server=~"$server"}`)
		}
	}
	return exprs, byServer
}

// grafanaVars are Grafana's variables as the dashboard uses them, with a
// value that makes the query plain PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__range", "1h", "${__range}", "1h", "$__interval", "1m", "$server", ".*")

// asRules writes the queries as recording rules to a file for promtool.
func asRules(t *testing.T, exprs []string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(grafanaVars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard_query_%d\n        expr: %s\n", i, q)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlVariables = regexp.MustCompile(`\$\{?\w+\}?`)
	promqlIdent     = regexp.MustCompile(`\b[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlKeywords  = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless", "inf", "nan", "atan2"}
)

// promqlMetrics returns the metric names an expression selects, in order.
func promqlMetrics(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlVariables.ReplaceAllString(s, " ")
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlGrouping.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		if strings.HasPrefix(rest, "(") || slices.Contains(promqlKeywords, strings.ToLower(name)) {
			continue // a function or an aggregation, or a keyword
		}
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.') {
			continue // the exponent or unit of a number: 1e3, 5m
		}
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// servedMetrics runs serve against a PostgreSQL where a lock is waited for
// and a Redis, waits until /metrics shows the waiter, the Redis source and
// the time blocked, and returns every metric name /metrics serves
// (histograms as their _bucket, _sum and _count series).
func servedMetrics(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := pgtest.Conn(t)
	if _, err := holder.Exec(ctx, "SELECT pg_advisory_lock(1, 8181)"); err != nil {
		t.Fatal(err)
	}
	waiter := pgtest.Conn(t)
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		_, _ = waiter.Exec(ctx, "SELECT pg_advisory_lock(1, 8181)")
	}()
	defer func() { cancel(); <-waited }()
	rs := redistest.Private(t)
	var stdout, stderr syncBuffer
	errc := make(chan error, 1)
	go func() {
		errc <- runServe(ctx, []string{"--dsn", pgtest.DSN(t), "--redis", rs.URL(), "--http", "127.0.0.1:0", "--interval", "100ms"}, &stdout, &stderr)
	}()
	base := waitURL(t, &stdout, errc)
	var text string
	blocked := regexp.MustCompile(`(?m)^locktop_snapshot_wait_seconds_total\{[^}]*namespace="AGENT"[^}]*\} [0-9.e+-]*[1-9]`)
	pgtest.Eventually(t, "/metrics shows the waiter, the Redis source and the time blocked", func() bool {
		_, body := httpGet(t, base+"/metrics")
		text = string(body)
		return strings.Contains(text, `locktop_source_up{source="redis"} 1`) && blocked.MatchString(text)
	})
	var names []string
	for _, l := range strings.Split(text, "\n") {
		f := strings.Fields(l)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		names = append(names, f[2])
		if f[3] == "histogram" || f[3] == "summary" {
			names = append(names, f[2]+"_bucket", f[2]+"_sum", f[2]+"_count")
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("serve: %v", err)
	}
	return names
}
