package model

// CompareBool orders false before true, for cmp.Or chains in sorts.
func CompareBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
