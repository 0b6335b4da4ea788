package redistest

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ServerCPU reports the CPU Redis spent per op (its used_cpu_user and
// used_cpu_sys, from INFO cpu) over the benchmark as server-µs/op: the
// server's share of a read, which the client's CPU (benchcpu) leaves out.
// Call the function it returns at the end.
func ServerCPU(b *testing.B, rdb *redis.Client) func() {
	ctx := context.Background()
	used := func() float64 {
		info, err := rdb.Info(ctx, "cpu").Result()
		if err != nil {
			b.Fatal(err)
		}
		var s float64
		for _, l := range strings.Split(info, "\r\n") {
			for _, f := range []string{"used_cpu_sys:", "used_cpu_user:"} {
				if v, ok := strings.CutPrefix(l, f); ok {
					x, _ := strconv.ParseFloat(v, 64)
					s += x
				}
			}
		}
		return s
	}
	before := used()
	return func() {
		if b.N > 0 {
			b.ReportMetric((used()-before)*1e6/float64(b.N), "server-µs/op")
		}
	}
}
