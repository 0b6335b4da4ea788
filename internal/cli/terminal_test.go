package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The end-to-end tests run the real binary in a real terminal: a tmux
// session on a private tmux server (its own socket), whose screen the test
// reads with capture-pane. CI runs as root without a terminal; tmux provides the pty.

// buildLocktop builds the binary under test into a temporary directory.
func buildLocktop(t *testing.T) string {
	t.Helper()
	built.once.Do(func() { built.bin, built.err = buildOnce() })
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

// built is the one locktop binary the package's tests share: linking it
// for each test cost seconds apiece. TestMain removes it.
var built struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

func buildOnce() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil && os.Getenv("GOROOT") != "" {
		goBin, err = filepath.Join(os.Getenv("GOROOT"), "bin", "go"), nil
	}
	if err != nil {
		return "", fmt.Errorf("no go command to build locktop with (not on PATH, no GOROOT): %v", err)
	}
	built.dir, err = os.MkdirTemp("", "locktop-e2e-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(built.dir, "locktop")
	cmd := exec.Command(goBin, "build", "-o", bin, "../..")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building locktop: %v\n%s", err, out)
	}
	return bin, nil
}

// terminal is a program running in a tmux pane of a given size.
type terminal struct {
	t        *testing.T
	socket   string // the private tmux server's socket (tmux -S)
	exitFile string // the program's exit status is written here
	secrets  []string
	last     string // the last screen read
}

// termOptions describe the program to run.
type termOptions struct {
	Width, Height int
	// Env is set for the program, after the variables that point at a
	// server (DATABASE_URL, PG*) are unset: the test says what it wants.
	Env []string
	// Secrets must never appear on the screen: every screen read is
	// checked.
	Secrets []string
}

// startTerminal runs argv in a new tmux server, sized w×h.
func startTerminal(t *testing.T, o termOptions, argv ...string) *terminal {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is needed for the end-to-end tests: apt-get install -y tmux (make test installs it)")
	}
	dir := t.TempDir()
	// The socket lives in a short directory of its own (a socket path has
	// a length limit) that goes with the test.
	sockDir, err := os.MkdirTemp("", "lt-tmux-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	tm := &terminal{
		t:        t,
		socket:   filepath.Join(sockDir, "s"),
		exitFile: filepath.Join(dir, "exit"),
		secrets:  o.Secrets,
	}
	// A script, so no argument meets two layers of quoting.
	var sc strings.Builder
	sc.WriteString("#!/bin/sh\n")
	sc.WriteString("unset DATABASE_URL LOCKTOP_TEST_DSN " + strings.Join(pgEnv, " ") + " PGPASSWORD PGPASSFILE\n")
	for _, kv := range o.Env {
		name, value, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&sc, "export %s=%s\n", name, shellQuote(value))
	}
	for i, a := range argv {
		if i > 0 {
			sc.WriteByte(' ')
		}
		sc.WriteString(shellQuote(a))
	}
	fmt.Fprintf(&sc, "\necho $? > %s\n", shellQuote(tm.exitFile))
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte(sc.String()), 0o700); err != nil {
		t.Fatal(err)
	}
	tm.tmux("-f", "/dev/null", "new-session", "-d", "-s", "main",
		"-x", strconv.Itoa(o.Width), "-y", strconv.Itoa(o.Height), script)
	t.Cleanup(func() { _ = exec.Command("tmux", "-S", tm.socket, "kill-server").Run() })
	return tm
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (tm *terminal) tmux(args ...string) string {
	tm.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-S", tm.socket}, args...)...).CombinedOutput()
	if err != nil {
		tm.t.Fatalf("tmux %s: %v: %s\nlast screen:\n%s", strings.Join(args, " "), err, out, tm.last)
	}
	return string(out)
}

// Screen returns what the terminal shows now.
func (tm *terminal) Screen() string {
	tm.t.Helper()
	s := tm.tmux("capture-pane", "-p", "-t", "main")
	for _, sec := range tm.secrets {
		if sec != "" && strings.Contains(s, sec) {
			tm.t.Fatalf("a secret is on the screen:\n%s", s)
		}
	}
	tm.last = s
	return s
}

// Await polls the screen until ok accepts it, or fails the test after
// timeout showing the last screen.
func (tm *terminal) Await(what string, timeout time.Duration, ok func(screen string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := tm.Screen()
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("timed out after %v waiting for %s; the screen:\n%s", timeout, what, s)
		}
		time.Sleep(100 * time.Millisecond) // the poll's period, not a synchronisation
	}
}

// AwaitText waits until every text is on the screen.
func (tm *terminal) AwaitText(timeout time.Duration, texts ...string) string {
	tm.t.Helper()
	return tm.Await(fmt.Sprintf("%q", texts), timeout, func(s string) bool {
		for _, x := range texts {
			if !strings.Contains(s, x) {
				return false
			}
		}
		return true
	})
}

// AwaitGone waits until text is no longer on the screen.
func (tm *terminal) AwaitGone(timeout time.Duration, text string) string {
	tm.t.Helper()
	return tm.Await(fmt.Sprintf("%q to go", text), timeout, func(s string) bool { return !strings.Contains(s, text) })
}

// Keys sends tmux key names ("Space", "Escape", "Enter", "q").
func (tm *terminal) Keys(keys ...string) {
	tm.t.Helper()
	tm.tmux(append([]string{"send-keys", "-t", "main"}, keys...)...)
}

// Type sends text literally.
func (tm *terminal) Type(s string) {
	tm.t.Helper()
	tm.tmux("send-keys", "-t", "main", "-l", s)
}

// ScreenANSI returns the screen with its escape codes (colours,
// attributes).
func (tm *terminal) ScreenANSI() string {
	tm.t.Helper()
	return tm.tmux("capture-pane", "-p", "-e", "-t", "main")
}

// Resize changes the terminal's size, as dragging a window's corner does.
func (tm *terminal) Resize(w, h int) {
	tm.t.Helper()
	tm.tmux("resize-window", "-t", "main", "-x", strconv.Itoa(w), "-y", strconv.Itoa(h))
}

// Close ends the tmux server, as closing a terminal window does: the
// program gets SIGHUP.
func (tm *terminal) Close() {
	tm.t.Helper()
	_ = exec.Command("tmux", "-S", tm.socket, "kill-server").Run()
}

// AwaitExit waits for the program to end and returns its exit status.
func (tm *terminal) AwaitExit(timeout time.Duration) int {
	tm.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		b, err := os.ReadFile(tm.exitFile)
		if err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			code, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				tm.t.Fatalf("exit status %q", b)
			}
			return code
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("the program did not exit within %v; last screen:\n%s", timeout, tm.last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var sgr = regexp.MustCompile(`\x1b\[([0-9;:]*)m`)

// sgrColours counts SGR sequences that set a colour: 30–38, 40–48,
// 90–97, 100–107 (39 and 49, back to the default, are no colour).
func sgrColours(s string) int {
	n := 0
	for _, m := range sgr.FindAllStringSubmatch(s, -1) {
		for _, p := range strings.FieldsFunc(m[1], func(r rune) bool { return r == ';' || r == ':' }) {
			v, _ := strconv.Atoi(p)
			if (v >= 30 && v <= 48 && v != 39) || (v >= 90 && v <= 107) {
				n++
				break
			}
		}
	}
	return n
}

// hasLine reports whether one line of screen contains every part.
func hasLine(screen string, parts ...string) bool {
	for _, line := range strings.Split(screen, "\n") {
		all := true
		for _, p := range parts {
			if !strings.Contains(line, p) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

// Expect waits until ok accepts the screen, like Await, but reports a
// screen that never comes as an error and goes on, so that one run shows
// every item that fails.
func (tm *terminal) Expect(what string, timeout time.Duration, ok func(screen string) bool) bool {
	tm.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s := tm.Screen()
		if ok(s) {
			return true
		}
		if time.Now().After(deadline) {
			tm.t.Errorf("after %v, still no %s; the screen:\n%s", timeout, what, s)
			return false
		}
		time.Sleep(100 * time.Millisecond) // the poll's period, not a synchronisation
	}
}

// besideBox returns the lines of screen that show anything left or right
// of an overlay's box.
func besideBox(screen string) []string {
	var out []string
	in := false
	for _, line := range strings.Split(screen, "\n") {
		if strings.Contains(line, "╭") {
			in = true
		}
		if !in {
			continue
		}
		left, right := strings.IndexAny(line, "╭│╰"), strings.LastIndexAny(line, "╮│╯")
		if left >= 0 && right >= 0 && (strings.TrimSpace(line[:left]) != "" || strings.TrimSpace(line[right+len("│"):]) != "") {
			out = append(out, line)
		}
		if strings.Contains(line, "╰") {
			break
		}
	}
	return out
}
