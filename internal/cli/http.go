package cli

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/locktop/locktop/internal/serve/httpapi"
)

// listenHTTP opens the listener of --http. An address that cannot be
// listened on is exit code 2, like a server that cannot be used;
// an address reachable from other machines gets a warning, because the lock
// table shows other sessions' queries.
func listenHTTP(addr string, stderr io.Writer) (net.Listener, error) {
	ln, err := httpapi.Listen(addr)
	if err != nil {
		var ae *httpapi.AddrError
		if errors.As(err, &ae) {
			return nil, usageError{ae.Error()}
		}
		// Busy, not permitted, not an address of this machine: the
		// operator's to fix, as a bad address is.
		return nil, exitError{code: exitUsage, err: fmt.Errorf("cannot listen on %s: %w", addr, err)}
	}
	if w := exposureWarning(ln.Addr()); w != "" {
		fmt.Fprintln(stderr, "locktop: warning:", w)
	}
	return ln, nil
}

// exposureWarning is the warning an address reachable from other machines
// gets ("" for loopback), for stderr and for the dashboard's screen.
func exposureWarning(a net.Addr) string {
	if httpapi.IsLoopback(a) {
		return ""
	}
	return fmt.Sprintf("%s is reachable from other machines, and /api/advisory-locks shows other sessions' queries", a)
}
