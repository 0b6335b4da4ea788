package cli

import (
	"fmt"
	"net/url"
	"os"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/pflag"

	"github.com/locktop/locktop/internal/source/pgsource"
)

// pgEnv are the libpq variables that name a server; any of them set means
// the operator pointed locktop at a database.
var pgEnv = []string{"PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"}

// connDefault says where the server comes from when no option names it;
// connDefaultThrowAway is the same for the commands that can start their
// own server.
const (
	connDefault          = "With none of these: DATABASE_URL, then the PG* variables."
	connDefaultThrowAway = "With none of these: DATABASE_URL, then the PG* variables, else a throw-away PostgreSQL."
)

// connFlags are the connection options of a command that connects: psql's
// -h/-p/-U/-d, a positional connection string (URL or key=value), and
// --dsn, the same string as a flag.
type connFlags struct {
	set                          *pflag.FlagSet
	dsn, host, port, user, dbase string
	positional                   string
}

// addConnFlags registers the connection options on fs.
func addConnFlags(fs *flagSet) *connFlags {
	c := &connFlags{set: pflag.NewFlagSet("connection", pflag.ContinueOnError)}
	c.set.SortFlags = false
	s := c.set
	s.StringVarP(&c.host, "host", "h", "", "server host or Unix socket directory")
	s.StringVarP(&c.port, "port", "p", "", "server port")
	s.StringVarP(&c.user, "username", "U", "", "user name")
	s.StringVarP(&c.dbase, "dbname", "d", "", "database name")
	s.StringVar(&c.dsn, "dsn", "", "the connection string, as a flag (instead of CONNINFO)")
	fs.AddFlagSet(s)
	fs.conn = c
	return c
}

// setPositional takes the positional argument: it must be a connection
// string, not a bare word (a mistyped command, or a database name that
// belongs after -d).
func (c *connFlags) setPositional(arg string) error {
	if !isConnString(arg) {
		return fmt.Errorf("unexpected argument %q: a connection string is a URL (postgres://...) or key=value; a database name goes after -d", arg)
	}
	if c.dsn != "" {
		return fmt.Errorf("a connection string given twice: as --dsn and as an argument")
	}
	c.positional = arg
	return nil
}

// isConnString reports whether s is a URL or a key=value connection string.
func isConnString(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") || strings.Contains(s, "=")
}

// check reports an option that the connection string sets as well: rather
// than pick one silently (psql lets the string win), say it.
func (c *connFlags) check() error {
	conn := c.conninfo()
	if conn == "" || len(c.options()) == 0 {
		return nil // a bad string alone is reported when it is used
	}
	has, err := connKeys(conn)
	if err != nil {
		return err
	}
	for _, o := range c.options() {
		if has[o.key] {
			return fmt.Errorf("%s and the connection string both set %s: give it once", o.flag, o.key)
		}
	}
	return nil
}

// conninfo is the connection string given, positional or --dsn.
func (c *connFlags) conninfo() string {
	if c.positional != "" {
		return c.positional
	}
	return c.dsn
}

type connOption struct{ flag, key, value string }

// options are the -h/-p/-U/-d given, as libpq keywords.
func (c *connFlags) options() []connOption {
	var out []connOption
	for _, o := range []connOption{
		{"-h/--host", "host", c.host}, {"-p/--port", "port", c.port},
		{"-U/--username", "user", c.user}, {"-d/--dbname", "dbname", c.dbase},
	} {
		if o.value != "" {
			out = append(out, o)
		}
	}
	return out
}

// resolve returns the DSN to connect with: the connection string given
// with the options added to it, else the options alone, else
// DATABASE_URL, else "" (pgx reads the PG* variables). given is false when
// nothing names a server: the caller then starts a throw-away cluster.
// Options the DSN does not set are filled in from the PG* variables by pgx.
// parseFlags has checked that options and string do not overlap.
func (c *connFlags) resolve() (dsn string, given bool) {
	conn, opts := c.conninfo(), c.options()
	if conn == "" && len(opts) == 0 {
		if u := os.Getenv("DATABASE_URL"); u != "" {
			return u, true
		}
		for _, v := range pgEnv {
			if os.Getenv(v) != "" {
				return "", true
			}
		}
		return "", false
	}
	if len(opts) == 0 {
		return conn, true
	}
	if u, ok := parseURL(conn); ok {
		q := u.Query()
		for _, o := range opts {
			q.Set(o.key, o.value)
		}
		u.RawQuery = q.Encode()
		return u.String(), true
	}
	parts := []string{}
	if conn != "" {
		parts = append(parts, conn)
	}
	for _, o := range opts {
		parts = append(parts, o.key+"="+quoteKV(o.value))
	}
	return strings.Join(parts, " "), true
}

// parseURL parses a postgres:// URL.
func parseURL(s string) (*url.URL, bool) {
	if !strings.HasPrefix(s, "postgres://") && !strings.HasPrefix(s, "postgresql://") {
		return nil, false
	}
	u, err := url.Parse(s)
	return u, err == nil
}

// kvKey finds the keywords of a key=value connection string.
var kvKey = regexp.MustCompile(`(?:^|\s)([A-Za-z_]+)\s*=`)

// kvQuoted is a quoted value of a key=value connection string.
var kvQuoted = regexp.MustCompile(`'(?:[^'\\]|\\.)*'`)

// connKeys returns which of host, port, user and dbname conn sets.
func connKeys(conn string) (map[string]bool, error) {
	has := map[string]bool{}
	if strings.HasPrefix(conn, "postgres://") || strings.HasPrefix(conn, "postgresql://") {
		u, ok := parseURL(conn)
		if !ok {
			if _, err := pgconn.ParseConfig(conn); err != nil {
				return nil, pgsource.Describe(err) // "bad DSN: ...", without the DSN
			}
			return nil, fmt.Errorf("cannot add options to the connection string: not a URL Go can parse")
		}
		q := u.Query()
		has["host"] = u.Hostname() != "" || q.Has("host") || q.Has("hostaddr")
		has["port"] = u.Port() != "" || q.Has("port")
		has["user"] = (u.User != nil && u.User.Username() != "") || q.Has("user")
		has["dbname"] = strings.Trim(u.Path, "/") != "" || q.Has("dbname")
		return has, nil
	}
	// Quoted values may hold "x=": drop them before looking for keywords.
	unquoted := kvQuoted.ReplaceAllString(conn, "''")
	for _, m := range kvKey.FindAllStringSubmatch(unquoted, -1) {
		k := m[1]
		if k == "hostaddr" {
			k = "host"
		}
		has[k] = true
	}
	return has, nil
}

// quoteKV quotes a value for a key=value connection string.
func quoteKV(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}
