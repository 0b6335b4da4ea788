package cli

import (
	"cmp"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v2"

	"github.com/locktop/locktop/internal/source/pgsource"
)

// A Target is one watched server and the lock sources beside it: what one
// --target NAME=CONNINFO, or one entry of a --config file, names. Name is
// "" for the one server of a command line without --target: it looks
// exactly as locktop did before there were targets.
type Target struct {
	Name    string
	DSN     string
	Sources SourceConfig
	// MaxConns bounds the connections locktop keeps open to the target's
	// server at once (its monitor's, and those naming other databases'
	// relations; pgsource.Options.ConnBound); 0: one for the monitor and
	// one per other database with waits to name.
	MaxConns int32
}

// targetFlags are --target (repeatable) and --config, on every command
// that watches servers.
type targetFlags struct {
	targets *[]string
	config  *string
}

func addTargetFlags(fs *flagSet) *targetFlags {
	return &targetFlags{
		targets: fs.StringArray("target", nil, "watch this server too, under a `NAME=CONNINFO` (repeatable; CONNINFO as psql takes it, service=NAME from pg_service.conf included); with several, a SERVER column"),
		config:  fs.String("config", "", "read the targets, each with its own Redis and lease sources, from this YAML `file` (see README: Targets)"),
	}
}

// given reports whether any target was named by --target or --config.
func (f *targetFlags) given() bool { return len(*f.targets) > 0 || *f.config != "" }

// servers resolves the servers a command watches: the DSN of the one
// unnamed server, or the targets of --target/--config. cmd names the
// command in the error when neither names a server.
func (f *targetFlags) servers(cmd string, conn *connFlags, srcs SourceConfig) (dsn string, targets []Target, err error) {
	dsn, given := conn.resolve()
	if f.given() {
		targets, err = f.resolve(conn, srcs)
		return dsn, targets, err
	}
	if !given {
		return "", nil, usagef("%s needs a database: give a connection string or -h/-p/-U/-d, or set DATABASE_URL or the PG* variables, or --target NAME=CONNINFO", cmd)
	}
	return dsn, nil, nil
}

// targetName is what a target may be called: short, and safe in a label,
// a filter and a source's name ("b/redis").
var targetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,31}$`)

// resolve returns the targets --config and --target name, the file's
// first. The sources the flags give (--redis, --lease-…) go with the first
// target, unless its --config entry names its own; every target watches its
// own database's lease tables when it has them, and --source-timeout
// bounds every source. A command line that also names a server the old way
// (CONNINFO, -h, …) is refused: one way at a time.
func (f *targetFlags) resolve(conn *connFlags, srcs SourceConfig) ([]Target, error) {
	if conn != nil && (conn.conninfo() != "" || len(conn.options()) > 0) {
		return nil, usagef("--target/--config and a connection string (or -h/-p/-U/-d) both name servers: give each as --target NAME=CONNINFO")
	}
	var out []Target
	if *f.config != "" {
		ts, err := readTargetFile(*f.config, srcs)
		if err != nil {
			return nil, err
		}
		out = append(out, ts...)
	}
	for _, t := range *f.targets {
		name, dsn, ok := strings.Cut(t, "=")
		if slices.Contains(connKeywords, name) {
			return nil, usagef("--target %s=…: the target's name comes first: --target NAME=%s", name, name+"=…")
		}
		if !ok || dsn == "" {
			// Not echoed: it may be a URL with a password.
			return nil, usagef("--target: give NAME=CONNINFO, e.g. --target orders=\"host=db1 dbname=orders\" or --target orders=service=orders")
		}
		out = append(out, Target{Name: name, DSN: dsn, Sources: SourceConfig{Timeout: srcs.Timeout}})
	}
	if len(out) > 0 && !out[0].Sources.named() {
		out[0].Sources = srcs
	}
	return out, checkTargets(out)
}

// connKeywords are libpq's commonest keywords: a --target that starts with
// one has left out its name.
var connKeywords = []string{"host", "hostaddr", "port", "dbname", "user", "password", "service", "servicefile", "sslmode", "connect_timeout", "application_name", "postgres", "postgresql"}

// checkTargets refuses a bad name, a name given twice, and a connection
// string that cannot be parsed (a service file that does not have the
// service, too): one line, no password.
func checkTargets(ts []Target) error {
	seen := map[string]bool{}
	for _, t := range ts {
		if !targetName.MatchString(t.Name) {
			// Not echoed: a URL given without a name may carry a password.
			return usagef("a target's name (before the first '=') has up to 32 letters, digits, '.', '_' or '-', starting with a letter or digit: give NAME=CONNINFO")
		}
		if seen[t.Name] {
			return usagef("target %q is named twice", t.Name)
		}
		seen[t.Name] = true
		if _, err := pgsource.Config(t.DSN, pgsource.Options{}); err != nil {
			return usagef("target %s: %v", t.Name, pgsource.Describe(err))
		}
	}
	return nil
}

// targetFile is the --config file:
//
//	source_timeout: 2s        # optional, for every source of every target
//	max_connections: 2        # optional, for every target
//	targets:
//	  - name: orders
//	    conninfo: "host=db1 dbname=orders"   # or service=orders, or a URL
//	    max_connections: 1                   # optional, this target's own
//	    redis: redis://cache1:6379/0         # optional
//	    lease_dsn: "host=db1 dbname=jobs"    # optional
//	    lease_sqlite: /var/lib/app/leases.db # optional
//	  - name: billing
//	    conninfo: service=billing
type targetFile struct {
	SourceTimeout  string `yaml:"source_timeout"`
	MaxConnections *int   `yaml:"max_connections"`
	Targets        []struct {
		Name           string `yaml:"name"`
		Conninfo       string `yaml:"conninfo"`
		Redis          string `yaml:"redis"`
		LeaseDSN       string `yaml:"lease_dsn"`
		LeaseSQLite    string `yaml:"lease_sqlite"`
		MaxConnections *int   `yaml:"max_connections"`
	} `yaml:"targets"`
}

// maxConnections checks a max_connections of the --config file: at least
// one (the monitor's), and no more than a server could give.
func maxConnections(path, what string, v *int) (int32, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 1 || *v > 1000 {
		return 0, usagef("--config %s: %smax_connections %d: give 1 (the monitor's connection alone) to 1000", path, what, *v)
	}
	return int32(*v), nil
}

// readTargetFile reads a --config file. Unknown keys are errors (a
// misspelt "redis" must not silently watch nothing). source_timeout, when
// given, replaces the flag's.
func readTargetFile(path string, flags SourceConfig) ([]Target, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--config: %v", err)
	}
	var tf targetFile
	if err := yaml.UnmarshalStrict(raw, &tf); err != nil {
		return nil, usagef("--config %s: %s", path, strings.Join(strings.Fields(err.Error()), " "))
	}
	if len(tf.Targets) == 0 {
		return nil, usagef("--config %s: no targets (a list under \"targets:\")", path)
	}
	timeout := flags.Timeout
	if tf.SourceTimeout != "" {
		d, err := time.ParseDuration(tf.SourceTimeout)
		if err != nil || d <= 0 {
			return nil, usagef("--config %s: source_timeout %q: give a positive duration such as 2s", path, tf.SourceTimeout)
		}
		timeout = d
	}
	all, err := maxConnections(path, "", tf.MaxConnections)
	if err != nil {
		return nil, err
	}
	var out []Target
	for i, e := range tf.Targets {
		if e.Conninfo == "" {
			return nil, usagef("--config %s: target %d (%q) has no conninfo", path, i+1, e.Name)
		}
		own, err := maxConnections(path, fmt.Sprintf("target %d (%q): ", i+1, e.Name), e.MaxConnections)
		if err != nil {
			return nil, err
		}
		src := SourceConfig{Redis: e.Redis, LeaseDSN: e.LeaseDSN, LeaseSQLite: e.LeaseSQLite, Timeout: timeout}
		out = append(out, Target{Name: e.Name, DSN: e.Conninfo, Sources: src, MaxConns: cmp.Or(own, all)})
	}
	return out, nil
}

// targetNames are the targets' names, in order.
func targetNames(ts []Target) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Name
	}
	return out
}

// named reports whether c names a source of its own (beyond the watched
// database's own lease tables).
func (c SourceConfig) named() bool { return c.Redis != "" || c.LeaseDSN != "" || c.LeaseSQLite != "" }
