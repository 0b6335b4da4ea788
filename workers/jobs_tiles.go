package workers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// tileCount is how many tiles make a map's tile set.
const tileCount = 8

func tileName(i int) string { return fmt.Sprintf("tile-%02d", i) }

// writeTiles writes tiles 0..n-1 of tile set set into dir, pausing between
// them; half, if not nil, is called when half of a set is written.
func writeTiles(ctx context.Context, dir, set string, pause time.Duration, n int, half func()) error {
	for i := range n {
		if i == tileCount/2 && half != nil {
			half()
		}
		if i > 0 && pause > 0 {
			if err := sleep(ctx, pause); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, tileName(i)), fmt.Appendf(nil, "%s %d/%d\n", set, i, tileCount), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// readable reports whether dir holds a tile set to read (it may be a
// directory of a process that has gone).
func readable(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, tileName(0)))
	return err == nil
}

// checkTiles reads the tile set in dir and returns its id, or how it is
// torn: tiles missing, or tiles of more than one set.
func checkTiles(dir string) (set, torn string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	sets := map[string]int{}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "tile-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return "", "", err
		}
		id, _, _ := strings.Cut(string(b), " ")
		sets[id]++
		n++
	}
	var parts []string
	for _, id := range slices.Sorted(mapsKeys(sets)) {
		parts = append(parts, fmt.Sprintf("%s×%d", id, sets[id]))
		set = id
	}
	switch {
	case len(sets) > 1:
		return "", fmt.Sprintf("tiles of %d sets (%s)", len(sets), strings.Join(parts, ", ")), nil
	case n != tileCount:
		return "", fmt.Sprintf("%d of %d tiles (%s)", n, tileCount, strings.Join(parts, ", ")), nil
	}
	return set, "", nil
}
