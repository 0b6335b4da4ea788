package pglocks_test

import (
	"context"
	"slices"
	"testing"

	"github.com/locktop/locktop/internal/source/pglocks"
	"github.com/locktop/locktop/internal/testenv/pgtest"
)

// A Reader reuses the last read's sorted order only while the server sends
// the same rows: here the second read sees the same locks, the third as many
// locks but one of them another key, which must come back in its place.
func TestReaderReusesOrderOnlyWhenUnchanged(t *testing.T) {
	ctx := context.Background()
	c, mon := pgtest.Conn(t), pgtest.Conn(t)
	if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(4242, k) FROM unnest(ARRAY[5, 1, 9, 7]) k"); err != nil {
		t.Fatal(err)
	}
	var rd pglocks.Reader
	ids := func(tb pglocks.Table) (out []int32) {
		for _, r := range tb.Rows {
			if r.Key.IsPair() && r.Key.Space() == 4242 {
				out = append(out, int32(r.Key.Int64()))
			}
		}
		return out
	}
	read := func(want ...int32) {
		t.Helper()
		got, err := rd.Read(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := pglocks.Read(ctx, mon)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(ids(got), want) || !slices.Equal(ids(fresh), want) {
			t.Fatalf("Reader read keys %v, Read %v, want %v", ids(got), ids(fresh), want)
		}
	}
	read(1, 5, 7, 9)
	read(1, 5, 7, 9)
	if _, err := c.Exec(ctx, "SELECT pg_advisory_unlock(4242, 9), pg_advisory_lock(4242, 3)"); err != nil {
		t.Fatal(err)
	}
	read(1, 3, 5, 7)
}
