package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuSeconds reads the CPU time a process has used so far, in seconds:
// the sum over its threads of /proc/PID/task/TID/schedstat's first field
// (nanoseconds on a CPU). /proc/PID/stat's utime+stime count clock ticks
// (10 ms): over a 10 s window that is 0.1% of a core, about a ninth of the
// dashboard's figure at rest, so windows moved by a whole tick apiece. A
// thread that exits between two reads takes its time with it; the
// processes measured here keep theirs. Without schedstat (a kernel built
// without it) it falls back to the ticks.
func cpuSeconds(pid string) (time.Time, float64, error) {
	now := time.Now()
	tasks, err := filepath.Glob("/proc/" + pid + "/task/*/schedstat")
	if err == nil && len(tasks) > 0 {
		var ns float64
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue // the thread has exited
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				continue
			}
			v, _ := strconv.ParseFloat(f[0], 64)
			ns += v
		}
		return now, ns / 1e9, nil
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("the process %s is not running: %w", pid, err)
	}
	// Fields after the parenthesised command name; utime and stime are
	// fields 14 and 15 of the whole line, in USER_HZ (100) ticks.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return now, (ut + st) / 100, nil
}
