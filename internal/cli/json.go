package cli

import (
	"encoding/json"
	"io"

	"github.com/locktop/locktop/internal/serve/httpapi"
	"github.com/locktop/locktop/internal/termsafe"
	"github.com/locktop/locktop/model"
)

// snapshotDocument is the document snapshot --json prints (and replay
// --json): GET /api/locks's, or with advisory the advisory-locks
// document of GET /api/advisory-locks.
func snapshotDocument(snap model.Snapshot, info model.ServerInfo, advisory bool) any {
	if advisory {
		return httpapi.NewDocument(snap, info)
	}
	return httpapi.NewLocksDocument(snap, info)
}

// printJSON prints v as indented JSON. As the table sanitizes, the JSON
// escapes what a terminal would act on (C1 controls, bidi overrides): it
// is printed too.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(termsafe.EscapeJSON(b), '\n'))
	return err
}
