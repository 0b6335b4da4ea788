package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/locktop/locktop/internal/record/recording"
)

// openRecording opens the recording a command names, or says in one line
// why it cannot be read (exit code 2). Damaged records are skipped: a
// warning on stderr says how many.
func openRecording(ctx context.Context, path string, stderr io.Writer) (*recording.Recording, error) {
	r, err := readRecording(ctx, path, stderr)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, exitError{code: exitUsage, err: fmt.Errorf("%s: %w", path, err)}
	}
	if n := len(r.Damage); n > 0 {
		d := r.Damage[0]
		fmt.Fprintf(stderr, "locktop: warning: %s: %d damaged records skipped (the first at byte %d: %s)\n", path, n, d.Offset, d.Reason)
	}
	if r.Len() == 0 {
		r.Close()
		return nil, exitError{code: exitUsage, err: fmt.Errorf("%s: the recording holds no snapshot", path)}
	}
	return r, nil
}

// parseRecording parses replay's or report's flags and opens the one FILE
// argument, the recording.
func parseRecording(ctx context.Context, fs *flagSet, args []string, stderr io.Writer) (*recording.Recording, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	switch a := fs.Args(); len(a) {
	case 0:
		return nil, fs.usageErr(errors.New("FILE is missing: the recording to read (a file, a --history directory, or a serve's http://HOST:PORT)"))
	case 1:
		return openRecording(ctx, a[0], stderr)
	default:
		return nil, fs.usageErr(fmt.Errorf("unexpected argument %q", a[1]))
	}
}
