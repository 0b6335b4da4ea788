// One initdb per machine: later clusters copy its data directory.

package pgcluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/locktop/locktop/internal/testenv/scratch"
)

// EnvTemplate names the environment variable that turns Options.Template on
// for every cluster of the process (and of the locktop binaries it runs):
// `make test` sets it.
const EnvTemplate = "LOCKTOP_PG_TEMPLATE"

// templatePrefix begins the name of a template directory; a template being
// made is under templatePrefix+"new-", swept if its maker died.
const templatePrefix = "locktop-pgtemplate-"

// initdbArgs are initdb's arguments after the data directory.
var initdbArgs = []string{"-U", Superuser, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"}

// initData fills c.data: by initdb, or with Options.Template (or
// EnvTemplate) by copying the machine's template, made by initdb the first
// time. initdb is most of a start's CPU (1.6 s of it, against 0.2 s for the
// copy, measured once at load 18), and `make test` starts a cluster per
// database test package and more in the end-to-end tests.
func (c *Cluster) initData(ctx context.Context, template bool) error {
	if !template && os.Getenv(EnvTemplate) == "" {
		return c.initdb(ctx, c.data)
	}
	src, err := c.template(ctx)
	if err != nil {
		return err
	}
	// cp -a keeps the owner (the postgres user, when we are root) and the
	// modes PostgreSQL insists on.
	if out, err := exec.CommandContext(ctx, "cp", "-a", src, c.data).CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: copying the template %s: %v: %s", src, err, lastLines(out, 3))
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context, data string) error {
	cmd := c.command(ctx, "initdb", append([]string{"-D", data}, initdbArgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgcluster: initdb failed: %v: %s", err, lastLines(out, 5))
	}
	return nil
}

// template returns the data directory of the machine's template for these
// binaries and this user, making it if there is none. Two processes that
// make it at once both succeed: the first rename wins, the other's copy is
// removed.
func (c *Cluster) template(ctx context.Context) (string, error) {
	final := filepath.Join(tempBase(), templatePrefix+c.templateID())
	data := filepath.Join(final, "data")
	if _, err := os.Stat(filepath.Join(data, "PG_VERSION")); err == nil {
		return data, nil
	}
	tmp, err := scratch.New(tempBase(), templatePrefix+"new-")
	if err != nil {
		return "", fmt.Errorf("pgcluster: %w", err)
	}
	defer os.RemoveAll(tmp) // nothing left once renamed
	if c.cred != nil {
		if err := os.Chown(tmp, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return "", fmt.Errorf("pgcluster: giving %s to the postgres user: %w", tmp, err)
		}
	}
	if err := c.initdb(ctx, filepath.Join(tmp, "data")); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil && !errors.Is(err, os.ErrExist) && !isNotEmpty(err) {
		return "", fmt.Errorf("pgcluster: keeping the template: %w", err)
	}
	return data, nil
}

// templateID names a template by what makes it: the server binaries
// (their path and initdb's size and time), initdb's arguments and the user
// the server runs as.
func (c *Cluster) templateID() string {
	h := sha256.New()
	fmt.Fprintln(h, c.bin, strings.Join(initdbArgs, " "), os.Geteuid())
	for _, b := range []string{"initdb", "postgres"} {
		if st, err := os.Stat(filepath.Join(c.bin, b)); err == nil {
			fmt.Fprintln(h, b, st.Size(), st.ModTime().UnixNano())
		}
	}
	if c.cred != nil {
		fmt.Fprintln(h, strconv.Itoa(int(c.cred.Uid)))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// isNotEmpty reports a rename onto a directory another process made first.
func isNotEmpty(err error) bool {
	var le *os.LinkError
	return errors.As(err, &le) && (errors.Is(le.Err, os.ErrExist) || errors.Is(le.Err, syscall.ENOTEMPTY))
}
