package pglocks

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/locktop/locktop/lockcore"
)

// shuffledRows are n advisory rows as a server sends them (its lock table's
// order): n-20 held keys of one space and 20 waiters on the first keys.
func shuffledRows(n int) []lockRow {
	rows := make([]lockRow, 0, n)
	for i := range n - 20 {
		rows = append(rows, lockRow{pid: 100, db: 5, key: lockcore.Pair(1, int32(i)), granted: true})
	}
	for i := range 20 {
		rows = append(rows, lockRow{pid: int32(200 + i), db: 5, key: lockcore.Pair(1, int32(i)), hasWait: i%2 == 0, wait: int64(1000 - i)})
	}
	rows = append(rows, lockRow{pid: 300, db: 4, key: lockcore.Int64(-7), granted: true})
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	return rows
}

// The packed sort keys order rows as the fields do.
func TestSortKeysOrderAsFields(t *testing.T) {
	rows := shuffledRows(500)
	rows = append(rows, lockRow{pid: 1, db: 5, key: lockcore.Int64(-1 << 40), granted: true},
		lockRow{pid: 1, db: 5, key: lockcore.Int64(1 << 40), granted: true}, lockRow{pid: 1, db: 5, key: lockcore.Pair(-3, 2), granted: true})
	want := slices.Clone(rows)
	stamp(want, 5000)
	slices.SortFunc(want, func(a, b lockRow) int {
		if a.db != b.db {
			return int(a.db) - int(b.db)
		}
		if a.key.IsPair() != b.key.IsPair() {
			if a.key.IsPair() {
				return -1
			}
			return 1
		}
		if a.key.Int64() != b.key.Int64() {
			if a.key.Int64() < b.key.Int64() {
				return -1
			}
			return 1
		}
		if a.granted != b.granted {
			if a.granted {
				return -1
			}
			return 1
		}
		if a.wait != b.wait && !a.granted {
			if a.wait < b.wait {
				return -1
			}
			return 1
		}
		return int(a.pid) - int(b.pid)
	})
	var rd Reader
	for i := range rows {
		rows[i].pack()
	}
	got := rd.sort(rows, 5000)
	for i := range got {
		if got[i].key != want[i].key || got[i].pid != want[i].pid {
			t.Fatalf("row %d: got key %v pid %d, want key %v pid %d", i, got[i].key, got[i].pid, want[i].key, want[i].pid)
		}
	}
}

// BenchmarkSortRows is the sort of a poll whose rows changed since the last:
// 10,000 rows in the server's order.
func BenchmarkSortRows(b *testing.B) {
	rows := shuffledRows(10_000)
	for i := range rows {
		rows[i].pack()
	}
	for b.Loop() {
		var rd Reader
		rd.sort(rows, 5000)
	}
}
