package lease

import (
	"fmt"
	"strconv"
)

// Mode is how a lock is held (seed 004 §3.1).
type Mode int

// The three modes.
const (
	// Read is shared: any number of readers, and one Upgradeable holder,
	// together; no writer.
	Read Mode = iota + 1
	// Write is exclusive.
	Write
	// Upgradeable is a read that may become a write (Lock.Upgrade): at most
	// one per resource; it coexists with readers and excludes writers and
	// other upgradeable holders (the U-lock of DistributedLock and SQL
	// Server), so two holders that both want to upgrade cannot deadlock.
	Upgradeable
)

var modeNames = [...]string{Read: "read", Write: "write", Upgradeable: "upgradeable"}

// String returns "read", "write" or "upgradeable", as stored in the table.
func (m Mode) String() string {
	if m >= Read && m <= Upgradeable {
		return modeNames[m]
	}
	return "Mode(" + strconv.Itoa(int(m)) + ")"
}

func parseMode(s string) (Mode, error) {
	for m := Read; m <= Upgradeable; m++ {
		if modeNames[m] == s {
			return m, nil
		}
	}
	return 0, fmt.Errorf("lease: unknown mode %q in the table", s)
}

func (m Mode) valid() bool { return m >= Read && m <= Upgradeable }

// compatible is the compatibility matrix: whether a grant in mode want can
// coexist with one already held in mode held.
//
//	held \ want   read  write  upgradeable
//	read          yes   no     yes
//	write         no    no     no
//	upgradeable   yes   no     no
func compatible(held, want Mode) bool {
	switch {
	case held == Write || want == Write:
		return false
	case held == Upgradeable && want == Upgradeable:
		return false
	default:
		return true
	}
}
