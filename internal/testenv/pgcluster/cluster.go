// Package pgcluster starts a private, throw-away PostgreSQL cluster for the
// demo, the simulator and the tests.
//
// The cluster lives in its own temporary directory, listens only on a Unix
// socket in that directory (never on TCP), runs with fsync off so it starts
// in a second or two, and is stopped and deleted by Stop. When the process
// runs as root, initdb and the server run as the unprivileged "postgres"
// user, because PostgreSQL refuses to run as root.
package pgcluster

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locktop/locktop/internal/testenv/scratch"
)

// ErrNoServer means the PostgreSQL server binaries could not be found.
var ErrNoServer = errors.New("PostgreSQL server binaries (initdb, postgres) not found on PATH or under /usr/lib/postgresql/*/bin; install them with: apt-get install -y postgresql")

// Superuser is the name of the cluster's superuser.
const Superuser = "postgres"

// Options tune a cluster. The zero value is what the demo and tests use.
type Options struct {
	// Settings are extra server settings (name -> value), applied after the
	// defaults, which include max_connections=400 and
	// max_locks_per_transaction=256 so 10,000 advisory locks fit.
	Settings map[string]string
	// StartTimeout bounds initdb plus start-up; default 60s.
	StartTimeout time.Duration
	// MovableClock runs the server under libfaketime, so that
	// AdvanceClock can move its clock forward: a test sees what a client
	// shows minutes later without waiting them (the server's timers are
	// then not to be trusted; see AdvanceClock).
	MovableClock bool
	// Template makes the data directory by copying the machine's template
	// (under the temporary directory, made by initdb the first time and
	// kept) instead of running initdb: a start in a fraction of the CPU.
	// The environment variable LOCKTOP_PG_TEMPLATE=1 does the same.
	Template bool
}

// Cluster is a running throw-away server.
type Cluster struct {
	root    string // temp dir holding everything
	data    string
	socket  string // directory of the Unix socket
	bin     string
	cred    *syscall.Credential
	cmd     *exec.Cmd
	args    []string // the server's command line
	exited  chan struct{}
	exitErr error
	logPath string
	clock   *clock // nil unless Options.MovableClock
}

// defaultSettings make a quick, disposable server with room for the
// simulator and the benchmarks.
var defaultSettings = map[string]string{
	"listen_addresses":           "",
	"port":                       "5432", // only names the socket file: no TCP
	"fsync":                      "off",
	"synchronous_commit":         "off",
	"full_page_writes":           "off",
	"max_connections":            "400",
	"max_locks_per_transaction":  "256",
	"shared_buffers":             "128MB",
	"logging_collector":          "off",
	"log_min_messages":           "warning",
	"dynamic_shared_memory_type": "posix",
}

// Start creates and starts a cluster. Cancelling ctx aborts the start-up.
// The caller must call Stop, also on Ctrl-C (see the demo's signal handling).
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	timeout := opts.StartTimeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	cred, err := serverCredential()
	if err != nil {
		return nil, err
	}
	// scratch.New sweeps first: a directory whose locktop died (kill -9)
	// goes at once, unless its server still runs.
	root, err := scratch.New(tempBase(), dirPrefix, "data/postmaster.pid")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{
		root: root, data: filepath.Join(root, "data"), socket: root, bin: bin, cred: cred,
		logPath: filepath.Join(root, "server.log"),
	}
	// Until start-up succeeds, any failure stops the server (if it runs)
	// and removes the directory.
	ok := false
	defer func() {
		if !ok {
			c.Stop()
		}
	}()
	if cred != nil {
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, fmt.Errorf("pgcluster: giving %s to the postgres user: %w", root, err)
		}
	}
	if opts.MovableClock {
		if c.clock, err = newClock(root); err != nil {
			return nil, err
		}
	}

	if err := c.initData(ctx, opts.Template); err != nil {
		return nil, err
	}
	if err := c.writeHBA(); err != nil {
		return nil, err
	}

	settings := make(map[string]string, len(defaultSettings)+len(opts.Settings))
	for k, v := range defaultSettings {
		settings[k] = v
	}
	for k, v := range opts.Settings {
		settings[k] = v
	}
	c.args = []string{"-D", c.data, "-k", c.socket}
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		c.args = append(c.args, "-c", k+"="+settings[k])
	}
	if err := c.launch(ctx); err != nil {
		return nil, err
	}
	ok = true
	return c, nil
}

// launch starts the server process on the cluster's data directory and
// waits until it accepts connections.
func (c *Cluster) launch(ctx context.Context) error {
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	defer logFile.Close()
	// Not CommandContext: the server must outlive the start-up context.
	cmd := c.command(context.Background(), "postgres", c.args...)
	if c.clock != nil {
		cmd.Env = append(cmd.Env, c.clock.env()...)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgcluster: starting postgres: %w", err)
	}
	exited := make(chan struct{})
	c.cmd, c.exited = cmd, exited
	go func() {
		c.exitErr = cmd.Wait()
		close(exited)
	}()
	return c.waitReady(ctx)
}

// Restart stops the server with a fast shutdown (every session is ended, as
// `pg_ctl restart -m fast` does) and starts it again on the same data and
// socket, for tests of what clients do when their server goes away and comes
// back. It must not run concurrently with Stop.
func (c *Cluster) Restart(ctx context.Context) error {
	c.shutdown()
	return c.launch(ctx)
}

// Down stops the server (a fast shutdown) and keeps its data and socket
// directory, for tests of a server that is gone for a while; Up starts it
// again on the same data and socket. Neither may run concurrently with
// Stop, Restart or Crash.
func (c *Cluster) Down() { c.shutdown() }

// Up starts a server that Down stopped.
func (c *Cluster) Up(ctx context.Context) error { return c.launch(ctx) }

// Crash stops the server as a crash would (an immediate shutdown, what
// `pg_ctl stop -m immediate` sends: no checkpoint, and WAL still in the
// server's buffers is lost, as with synchronous_commit=off) and starts it
// again on the same data and socket, which replays the WAL from the last
// checkpoint. The machine does not crash: what reached the operating system
// survives even with fsync off. It must not run concurrently with Stop.
func (c *Cluster) Crash(ctx context.Context) error {
	c.halt(syscall.SIGQUIT)
	return c.launch(ctx)
}

// command builds an exec.Cmd for one of the server binaries, run as the
// postgres user when we are root, in its own process group so a terminal's
// Ctrl-C reaches us first and we stop the server in order. Pdeathsig stops
// the server if this process dies without calling Stop.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.root
	cmd.Env = append(os.Environ(), "LC_ALL=C", "TZ=UTC")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred, Pdeathsig: syscall.SIGQUIT}
	return cmd
}

func (c *Cluster) waitReady(ctx context.Context) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.exited:
			return fmt.Errorf("pgcluster: postgres exited during start-up (%v): %s", c.exitErr, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pgcluster: postgres not ready: %w: %s", ctx.Err(), c.logTail())
		case <-tick.C:
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(pctx, c.DSN("postgres"))
		if err == nil {
			err = conn.Ping(pctx)
			conn.Close(pctx)
		}
		cancel()
		if err == nil {
			return nil
		}
	}
}

// hba trusts the superuser on the private socket (only this machine's
// root and postgres users can reach that directory) and asks every other
// role for its password, so tests can exercise wrong passwords and roles
// with fewer privileges.
const hba = `local all ` + Superuser + ` trust
local all all scram-sha-256
`

func (c *Cluster) writeHBA() error {
	p := filepath.Join(c.data, "pg_hba.conf")
	if err := os.WriteFile(p, []byte(hba), 0o600); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(p, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("pgcluster: %w", err)
		}
	}
	return nil
}

// DSN returns a connection string for database db as the superuser.
func (c *Cluster) DSN(db string) string { return c.DSNAs(Superuser, "", db) }

// DSNAs returns a connection string for database db as user, with password
// when it is not "".
func (c *Cluster) DSNAs(user, password, db string) string {
	q := url.Values{"host": {c.socket}, "port": {"5432"}, "sslmode": {"disable"}}
	u := url.URL{Scheme: "postgres", Path: "/" + db, RawQuery: q.Encode()}
	if password != "" {
		u.User = url.UserPassword(user, password)
	} else {
		u.User = url.User(user)
	}
	return u.String()
}

// SocketDir returns the directory that holds the server's Unix socket.
func (c *Cluster) SocketDir() string { return c.socket }

// Dir returns the cluster's temporary directory.
func (c *Cluster) Dir() string { return c.root }

// Stop shuts the server down (fast shutdown: clients are disconnected) and
// deletes the cluster's directory. It is safe to call more than once.
func (c *Cluster) Stop() error {
	if c == nil {
		return nil
	}
	c.shutdown()
	if c.root == "" {
		return nil
	}
	err := os.RemoveAll(c.root)
	if err != nil {
		return fmt.Errorf("pgcluster: removing %s: %w", c.root, err)
	}
	c.root = ""
	return nil
}

// shutdown stops the server process, if it runs: a fast shutdown, then an
// immediate one, then SIGKILL.
func (c *Cluster) shutdown() { c.halt(syscall.SIGINT) }

// halt sends the server sig (SIGINT: a fast shutdown, SIGQUIT: an immediate
// one) and waits for it to exit, escalating to an immediate shutdown and then
// SIGKILL if it does not.
func (c *Cluster) halt(sig syscall.Signal) {
	if c.cmd == nil || c.cmd.Process == nil {
		return
	}
	select {
	case <-c.exited:
		return
	default:
	}
	_ = c.cmd.Process.Signal(sig)
	select {
	case <-c.exited:
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown
		select {
		case <-c.exited:
		case <-time.After(5 * time.Second):
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	}
}

// Running reports whether the server process is still alive.
func (c *Cluster) Running() bool {
	select {
	case <-c.exited:
		return false
	default:
		return c.cmd != nil
	}
}

func (c *Cluster) logTail() string {
	b, _ := os.ReadFile(c.logPath)
	return lastLines(b, 5)
}

// dirPrefix begins the name of every cluster directory.
const dirPrefix = "locktop-pg-"

// binGlob is where Debian-style packages put the server binaries.
var binGlob = "/usr/lib/postgresql/*/bin"

// FindBin returns the directory with initdb and postgres: PATH first, else
// the newest /usr/lib/postgresql/<version>/bin.
func FindBin() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob(binGlob)
	version := func(d string) float64 {
		v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(d)), 64)
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return cmp.Compare(version(b), version(a)) })
	for _, d := range dirs {
		_, e1 := os.Stat(filepath.Join(d, "initdb"))
		_, e2 := os.Stat(filepath.Join(d, "postgres"))
		if e1 == nil && e2 == nil {
			return d, nil
		}
	}
	return "", ErrNoServer
}

// serverCredential returns the identity to run the server as: nil when we
// are not root, else the postgres user.
func serverCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root, and PostgreSQL refuses to run as root, but there is no \"postgres\" user to run it as (%v); install the server package (apt-get install -y postgresql) or run as another user", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// tempBase is where cluster directories go. The postgres user must be able
// to reach it, which a root-only TMPDIR would not allow.
func tempBase() string {
	d := os.TempDir()
	if os.Geteuid() == 0 {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm()&0o001 == 0 {
			return "/tmp"
		}
	}
	return d
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(bytes.ToValidUTF8(b, nil))), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
