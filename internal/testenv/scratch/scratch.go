// Package scratch makes the throw-away directories locktop's servers and
// simulator work in, and sweeps the ones a dead process left behind.
//
// A directory records the process that made it (its pid and that process's
// start time, so a reused pid is not taken for the owner). Sweep removes a
// directory at once when its owner is gone and no process it names as still
// running (a server's own pid file) is alive: after kill -9 of locktop, the
// next start cleans up, however recent the directory is.
package scratch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerFile holds "pid starttime" of the process that made the directory.
const ownerFile = ".locktop-owner"

// legacyAge is how old a directory without an owner file (made by an older
// locktop) must be before Sweep removes it.
const legacyAge = 2 * time.Minute

// New makes a directory under base (os.TempDir() when "") whose name begins
// with prefix, records this process as its owner, and first sweeps what
// dead processes left under base with that prefix (pidFiles as for Sweep).
func New(base, prefix string, pidFiles ...string) (string, error) {
	if base == "" {
		base = os.TempDir()
	}
	Sweep(base, prefix, pidFiles...)
	dir, err := os.MkdirTemp(base, prefix)
	if err != nil {
		return "", fmt.Errorf("scratch: %w", err)
	}
	self := os.Getpid()
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(self)+" "+startTime(self)+"\n"), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("scratch: %w", err)
	}
	return dir, nil
}

// Sweep removes directories under base named prefix* whose owner process is
// gone, unless a pid file inside names a process still alive (a server that
// outlived its owner and is still shutting down: the next sweep takes it).
// pidFiles are paths relative to each directory whose first line is a pid,
// such as "data/postmaster.pid".
func Sweep(base, prefix string, pidFiles ...string) {
	dirs, _ := filepath.Glob(filepath.Join(base, prefix+"*"))
	for _, d := range dirs {
		st, err := os.Stat(d)
		if err != nil || !st.IsDir() {
			continue
		}
		if !ownerGone(d, st) {
			continue
		}
		alive := false
		for _, f := range pidFiles {
			if pid := readPID(filepath.Join(d, f)); pid > 0 && processAlive(pid) {
				alive = true
			}
		}
		if !alive {
			_ = os.RemoveAll(d)
		}
	}
}

// ownerGone reports whether the process that made d has ended. A directory
// without an owner file counts as abandoned once it is legacyAge old.
func ownerGone(d string, st os.FileInfo) bool {
	b, err := os.ReadFile(filepath.Join(d, ownerFile))
	if errors.Is(err, os.ErrNotExist) {
		return time.Since(st.ModTime()) >= legacyAge
	}
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return false
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return false
	}
	if !processAlive(pid) {
		return true
	}
	// The pid is taken: by the owner, or by a process that reused it.
	return len(f) > 1 && f[1] != "" && startTime(pid) != f[1]
}

// Owned reports whether d was made by this process (New).
func Owned(d string) bool {
	b, err := os.ReadFile(filepath.Join(d, ownerFile))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 0 && f[0] == strconv.Itoa(os.Getpid())
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(first))
	return pid
}

// processAlive reports whether pid names a live process (perhaps of another
// user: EPERM means it exists).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// startTime returns a process's start time in clock ticks since boot
// (field 22 of /proc/PID/stat), or "" where /proc cannot tell.
func startTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) may hold spaces and parentheses: the
	// fields that follow start after its last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	const startField = 22 - 3 // fields 3.. follow the name
	if len(f) <= startField {
		return ""
	}
	return f[startField]
}
