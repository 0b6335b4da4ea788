package cli

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// README's Layout table has one row per package `go list ./...` prints,
// each saying what it owns, and nothing else.
func TestReadmeLayoutListsEveryPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.Dir}}", "../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.ToSlash(rel)] = true
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Layout\n")
	if !ok {
		t.Fatal("README has no Layout section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("(?m)^\\| `([^`]+)` \\| (.*) \\|$")
	got := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(section, -1) {
		pkg := strings.TrimSuffix(m[1], "/")
		if pkg == "main.go" {
			pkg = "." // the root package is main.go
		}
		switch {
		case !want[pkg]:
			t.Errorf("README's Layout lists %q, which go list does not print", m[1])
		case got[pkg]:
			t.Errorf("README's Layout lists %q twice", m[1])
		case strings.TrimSpace(m[2]) == "":
			t.Errorf("README's Layout does not say what %q owns", m[1])
		}
		got[pkg] = true
	}
	for pkg := range want {
		if !got[pkg] {
			t.Errorf("README's Layout leaves out package %s", pkg)
		}
	}
}
