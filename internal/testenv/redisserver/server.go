package redisserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/locktop/locktop/internal/testenv/scratch"
)

// ErrNoServer means redis-server could not be found.
var ErrNoServer = errors.New("redis-server not found on PATH; install it with: apt-get install -y redis-server")

// Options tune a server. The zero value is what the demo and tests use.
type Options struct {
	// Args are extra configuration directives, passed on the command line
	// after the defaults ("--maxmemory", "64mb", ...).
	Args []string
	// StartTimeout bounds start-up; default 30s.
	StartTimeout time.Duration
}

// Server is a running throw-away redis-server on a Unix socket.
type Server struct {
	root    string // temp dir holding the socket, the log and the pid file
	socket  string
	args    []string
	timeout time.Duration
	proc    *process
}

// dirPrefix begins the name of every server directory; clusterPrefix every
// cluster directory.
const (
	dirPrefix     = "locktop-redis-"
	clusterPrefix = "locktop-rediscluster-"
)

// Start starts a server. Cancelling ctx aborts the start-up. The caller must
// call Stop, also on Ctrl-C (the commands' signal handling does).
func Start(ctx context.Context, opts Options) (*Server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	// scratch.New sweeps first: a directory whose owner died (kill -9) goes
	// at once, unless its server still runs.
	root, err := scratch.New(tempBase(), dirPrefix, "redis.pid")
	if err != nil {
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	s := &Server{root: root, socket: filepath.Join(root, "redis.sock"), timeout: startTimeout(opts.StartTimeout)}
	s.args = append([]string{bin,
		"--port", "0", // no TCP at all
		"--unixsocket", s.socket, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", // no persistence
		"--dir", root, "--logfile", filepath.Join(root, "redis.log"), "--pidfile", filepath.Join(root, "redis.pid"),
		"--daemonize", "no",
	}, opts.Args...)
	if err := s.launch(ctx); err != nil {
		_ = s.Stop()
		return nil, err
	}
	return s, nil
}

// launch starts the process and waits until it answers PING.
func (s *Server) launch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	p, err := spawn(s.root, filepath.Join(s.root, "redis.log"), s.args)
	if err != nil {
		return err
	}
	s.proc = p
	return p.waitReady(ctx, &redis.Options{Network: "unix", Addr: s.socket})
}

// URL returns the server's address as a go-redis URL: unix:///dir/redis.sock.
func (s *Server) URL() string { return (&url.URL{Scheme: "unix", Path: s.socket}).String() }

// Socket returns the path of the server's Unix socket.
func (s *Server) Socket() string { return s.socket }

// Dir returns the server's temporary directory.
func (s *Server) Dir() string { return s.root }

// Running reports whether the server process is alive.
func (s *Server) Running() bool { return s.proc.running() }

// Restart stops the server and starts an empty one on the same socket: for
// tests of clients whose Redis goes away and comes back (without
// persistence the data is gone, as after a failover that lost writes). It
// must not run concurrently with Stop.
func (s *Server) Restart(ctx context.Context) error {
	s.proc.shutdown()
	return s.launch(ctx)
}

// Halt stops the server process but keeps its directory, so the socket
// path refuses connections until Resume: Redis is unreachable.
func (s *Server) Halt() { s.proc.shutdown() }

// Resume starts an empty server again after Halt.
func (s *Server) Resume(ctx context.Context) error { return s.launch(ctx) }

// Freeze stops the server process with SIGSTOP: connections are accepted
// by the kernel but nothing answers, as with a hung or partitioned Redis.
// Thaw (or Stop) ends it.
func (s *Server) Freeze() error { return s.proc.signal(syscall.SIGSTOP) }

// Thaw continues a frozen server.
func (s *Server) Thaw() error { return s.proc.signal(syscall.SIGCONT) }

// Stop ends the server and deletes its directory. It is safe to call more
// than once.
func (s *Server) Stop() error {
	if s == nil {
		return nil
	}
	s.proc.shutdown()
	if s.root == "" {
		return nil
	}
	if err := os.RemoveAll(s.root); err != nil {
		return fmt.Errorf("redisserver: removing %s: %w", s.root, err)
	}
	s.root = ""
	return nil
}

// FindBin returns the path of redis-server.
func FindBin() (string, error) {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/bin/redis-server", "/usr/local/bin/redis-server"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", ErrNoServer
}

func startTimeout(d time.Duration) time.Duration {
	if d <= 0 {
		return 30 * time.Second
	}
	return d
}

// process is one running redis-server.
type process struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
	logPath string
}

// spawn starts redis-server with args (args[0] is the binary) in its own
// process group, so a terminal's Ctrl-C reaches us first and we stop the
// server in order; Pdeathsig ends it if this process dies without Stop.
func spawn(dir, logPath string, args []string) (*process, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	// Before it opens its log file (a bad directive, say), the server
	// writes to stdout: into the same file.
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("redisserver: %w", err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redisserver: starting redis-server: %w", err)
	}
	p := &process{cmd: cmd, exited: make(chan struct{}), logPath: logPath}
	go func() {
		p.exitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady polls PING until the server answers, exits, or ctx ends.
func (p *process) waitReady(ctx context.Context, opt *redis.Options) error {
	opt.MaxRetries, opt.PoolSize, opt.DialTimeout = -1, 1, time.Second
	c := redis.NewClient(opt)
	defer c.Close()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		err := c.Ping(pctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("redisserver: redis-server exited during start-up (%v): %s", p.exitErr, p.logTail())
		case <-ctx.Done():
			return fmt.Errorf("redisserver: redis-server not ready: %w (last error: %v): %s", ctx.Err(), err, p.logTail())
		case <-tick.C:
		}
	}
}

// shutdown ends the process, if it runs: SIGTERM (with no persistence
// configured Redis exits at once), then SIGKILL.
func (p *process) shutdown() {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // if frozen
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

func (p *process) signal(sig syscall.Signal) error {
	if !p.running() {
		return errors.New("redisserver: the server is not running")
	}
	return p.cmd.Process.Signal(sig)
}

func (p *process) running() bool {
	if p == nil || p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *process) logTail() string {
	b, _ := os.ReadFile(p.logPath)
	lines := strings.Split(strings.TrimSpace(string(bytes.ToValidUTF8(b, nil))), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// tempBase is where server directories go: os.TempDir(), unless the socket
// path would be too long for a Unix socket (108 bytes on Linux).
func tempBase() string {
	d := os.TempDir()
	if len(d)+len(dirPrefix)+len("/XXXXXXXXXX/redis.sock") > 100 {
		return "/tmp"
	}
	return d
}
