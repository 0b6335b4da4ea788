package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/locktop/locktop/lockcore"
	"github.com/locktop/locktop/model"
)

// configLabel is how config editor attempts show in the event stream.
const configLabel = "config"

// EditConfig sets key to value in the JSON config file, as the seed's config
// editor does: take flock on the file's lock file (waiting up to the lock
// timeout), read the file, change it, write it back atomically (temporary
// file and rename), unlock. A second editor therefore reads the first one's
// result before merging its own change. With locking off there is no
// flock, and concurrent edits lose each other's keys.
func (e *Env) EditConfig(ctx context.Context, key, value string) error {
	if e.ConfigPath == "" {
		return errors.New("workers: config editor: no config path")
	}
	start := time.Now()
	attempt := func(out model.Outcome, err error, body bool) {
		e.Rec.Attempt(Attempt{Kind: KindConfigEditor, Label: configLabel, Outcome: out, Wait: time.Since(start), Err: err, Body: body})
	}
	if e.Locking() {
		unlock, err := flock(ctx, e.ConfigPath+".lock", e.LockTimeout())
		if err != nil {
			attempt(classify(ctx, err), err, false)
			return err
		}
		defer unlock()
	}
	attempt(model.OutcomeAcquired, nil, false)
	if err := e.editConfig(ctx, key, value); err != nil {
		attempt(classify(ctx, err), err, true)
		return err
	}
	e.configKeys.add(key)
	e.Rec.Section(KindConfigEditor)
	return nil
}

func (e *Env) editConfig(ctx context.Context, key, value string) error {
	cfg := map[string]string{}
	b, err := os.ReadFile(e.ConfigPath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("config editor: %w", err)
	default:
		if len(b) > 0 {
			if err := json.Unmarshal(b, &cfg); err != nil {
				return fmt.Errorf("config editor: %s: %w", e.ConfigPath, err)
			}
		}
	}
	e.at(ctx, PointConfigRead, 0)
	if err := sleep(ctx, e.Timing().ConfigEdit); err != nil {
		return err
	}
	cfg[key] = value
	out, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	return writeFileAtomic(e.ConfigPath, out)
}

// writeFileAtomic writes b to a temporary file beside path and renames it
// over path, so a reader never sees half a file.
func writeFileAtomic(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("config editor: %w", err)
	}
	_, werr := f.Write(b)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("config editor: %w", err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		os.Remove(f.Name())
		return fmt.Errorf("config editor: %w", err)
	}
	return nil
}

// flock takes an exclusive flock on path (created if missing), polling
// without blocking so that ctx and timeout can end the wait: flock(2) itself
// cannot be interrupted. It returns the unlock function.
func flock(ctx context.Context, path string, timeout time.Duration) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("config editor: %w", err)
	}
	deadline := time.Now().Add(timeout)
	backoff := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("config editor: flock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("config editor: flock %s: %w", path, lockcore.ErrTimeout)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			f.Close()
			return nil, ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, 20*time.Millisecond)
	}
}

// auditConfig checks that every key whose edit completed in this process is
// in the config file.
func (e *Env) auditConfig() error {
	keys := e.configKeys.list()
	if len(keys) == 0 {
		return nil
	}
	cfg := map[string]string{}
	b, err := os.ReadFile(e.ConfigPath)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("config audit: %w", err)
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("config audit: %s: %w", e.ConfigPath, err)
		}
	}
	for _, k := range keys {
		if _, ok := cfg[k]; !ok {
			e.Rec.Violation(InvConfigKeys, "config:"+k, fmt.Sprintf("config key %s was saved and is gone: a concurrent edit overwrote it", k))
		}
	}
	return nil
}
