package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// A command's files (NAME.go and NAME_*.go, for each command and the
// dashboard) use the shared files (stack.go, flags.go, redact.go, …) and
// never a name another command's files declare: what two commands share
// has a file of its own.
func TestCommandsShareOnlySharedFiles(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"dashboard"}
	for _, c := range commands {
		names = append(names, c.name)
	}
	// owner is the command a file belongs to, "" for a shared file.
	owner := func(file string) string {
		base := strings.TrimSuffix(file, ".go")
		for _, n := range names {
			if base == n || strings.HasPrefix(base, n+"_") {
				return n
			}
		}
		return ""
	}
	fset := token.NewFileSet()
	parsed := map[string]*ast.File{}
	declared := map[string]string{} // top-level name → its file
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		parsed[file] = f
		for name := range f.Scope.Objects {
			declared[name] = file
		}
	}
	checked := 0
	for file, f := range parsed {
		cmd := owner(file)
		if cmd == "" {
			continue
		}
		checked++
		for _, id := range f.Unresolved {
			other, ok := declared[id.Name]
			if ok && owner(other) != "" && owner(other) != cmd {
				t.Errorf("%s (%s) uses %s of %s (%s): move it to a shared file", file, cmd, id.Name, other, owner(other))
			}
		}
	}
	if checked < len(names) {
		t.Errorf("found %d command files for %d commands: %v", checked, len(names), names)
	}
}
