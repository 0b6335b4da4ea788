package main

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// TestCPUSecondsCountsThisProcess: a busy loop of the test's own shows up
// in cpuSeconds; a process that does not exist is an error.
func TestCPUSecondsCountsThisProcess(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	_, c0, err := cpuSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(30 * time.Millisecond); time.Now().Before(end); {
	}
	_, c1, err := cpuSeconds(pid)
	if err != nil {
		t.Fatal(err)
	}
	if d := c1 - c0; d <= 0 {
		t.Fatalf("30 ms of busy loop counted as %v s", d)
	}
	if _, _, err := cpuSeconds("999999999"); err == nil {
		t.Fatal("no error for a process that does not exist")
	}
}
