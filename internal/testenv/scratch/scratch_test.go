package scratch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

func TestNewRecordsOwner(t *testing.T) {
	base := t.TempDir()
	d, err := New(base, "x-")
	if err != nil {
		t.Fatal(err)
	}
	if !Owned(d) {
		t.Fatal("a new directory is not owned by its maker")
	}
	Sweep(base, "x-")
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("a live owner's directory was swept: %v", err)
	}
}

// A directory whose owner died is swept at once, however young it is.
func TestSweepDeadOwner(t *testing.T) {
	base := t.TempDir()
	dead := deadPID(t)
	d := filepath.Join(base, "x-dead")
	mkOwned(t, d, strconv.Itoa(dead)+" 1")
	Sweep(base, "x-")
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Fatalf("dead owner's directory kept: %v", err)
	}
}

// A pid reused by another process is not the owner.
func TestSweepReusedPID(t *testing.T) {
	base := t.TempDir()
	d := filepath.Join(base, "x-reused")
	mkOwned(t, d, strconv.Itoa(os.Getpid())+" 1") // our pid, another start time
	Sweep(base, "x-")
	if _, err := os.Stat(d); !os.IsNotExist(err) {
		t.Fatalf("directory of a reused pid kept: %v", err)
	}
}

// A server still running inside a dead owner's directory keeps it.
func TestSweepSparesLiveServer(t *testing.T) {
	base := t.TempDir()
	d := filepath.Join(base, "x-server")
	mkOwned(t, d, strconv.Itoa(deadPID(t))+" 1")
	if err := os.WriteFile(filepath.Join(d, "server.pid"), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Sweep(base, "x-", "server.pid")
	if _, err := os.Stat(d); err != nil {
		t.Fatalf("directory with a live server swept: %v", err)
	}
}

// Directories from before owner files are swept only once old.
func TestSweepLegacy(t *testing.T) {
	base := t.TempDir()
	young, old := filepath.Join(base, "x-young"), filepath.Join(base, "x-old")
	for _, d := range []string{young, old} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	past := time.Now().Add(-2 * legacyAge)
	if err := os.Chtimes(old, past, past); err != nil {
		t.Fatal(err)
	}
	Sweep(base, "x-")
	if _, err := os.Stat(young); err != nil {
		t.Errorf("young legacy directory swept: %v", err)
	}
	if _, err := os.Stat(old); !os.IsNotExist(err) {
		t.Errorf("old legacy directory kept: %v", err)
	}
}

func mkOwned(t *testing.T, d, owner string) {
	t.Helper()
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, ownerFile), []byte(owner+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// deadPID returns the pid of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}
