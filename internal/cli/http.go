package cli

import (
	"errors"
	"fmt"
	"net"

	"github.com/locktop/locktop/internal/serve/httpapi"
)

// listenHTTP opens the listener of --http. An address that cannot be
// listened on is exit code 2, like a server that cannot be used. What an
// address reachable from other machines reveals is exposureFlags' to say.
func listenHTTP(addr string) (net.Listener, error) {
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
	return ln, nil
}
