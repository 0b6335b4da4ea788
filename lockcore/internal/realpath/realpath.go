// Package realpath names a file by its absolute path with no symbolic link
// in it, so that the spellings of one file's path (relative, "./", "//",
// through a link) are one name: the store of a lock that lives in a file
// (a lease's SQLite database) or is reached through one (a Redis socket).
package realpath

import "path/filepath"

// Of returns path made absolute with its symbolic links resolved. A file
// that is not there yet is named by its directory's resolved path (/var/run
// is often a link to /run), so that a name taken before the file exists is
// the name taken after.
func Of(path string) string {
	if p, err := filepath.Abs(path); err == nil {
		path = p
	}
	if p, err := filepath.EvalSymlinks(path); err == nil {
		return p
	}
	if d, err := filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
		return filepath.Join(d, filepath.Base(path))
	}
	return path
}
