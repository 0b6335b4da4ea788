package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	e.configKeys.begin(key)
	if err := e.editConfig(ctx, key, value); err != nil {
		e.configKeys.drop(key)
		attempt(classify(ctx, err), err, true)
		return err
	}
	// Still under the flock: the next editor reads a file with the key in
	// it and knows the key is followed, so it does not prune it.
	e.configKeys.saved(key, time.Now())
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
	e.configKeys.prune(cfg, e.Proc+".")
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

// configSettle is how long after it was saved a key must still be in the
// file before the check stops following it: an editor that read the file
// before the key was saved writes back well within that (its read-modify-
// write takes Timing.ConfigEdit), so a key it loses is missing by then.
const configSettle = time.Second

// configBook follows this Env's config keys from the start of their edit
// until a check has found them in the file configSettle after they were
// saved, or found them lost. Keys that begin with the Env's Proc and a dot
// and are no longer followed are pruned from the file by the next edit, so
// the file and the book stay small however long the run (as long as the
// check runs now and then: see AuditConfig).
type configBook struct {
	mu   sync.Mutex
	keys map[string]time.Time // zero while the edit is under way, then when it was saved
}

func (b *configBook) begin(k string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.keys == nil {
		b.keys = map[string]time.Time{}
	}
	b.keys[k] = time.Time{}
}

func (b *configBook) saved(k string, at time.Time) {
	b.mu.Lock()
	b.keys[k] = at
	b.mu.Unlock()
}

func (b *configBook) drop(k string) {
	b.mu.Lock()
	delete(b.keys, k)
	b.mu.Unlock()
}

// prune deletes from cfg the keys that begin with own and are not followed.
func (b *configBook) prune(cfg map[string]string, own string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k := range cfg {
		if _, ok := b.keys[k]; !ok && strings.HasPrefix(k, own) {
			delete(cfg, k)
		}
	}
}

// savedKeys returns the keys saved and still followed, with when.
func (b *configBook) savedKeys() map[string]time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]time.Time, len(b.keys))
	for k, at := range b.keys {
		if !at.IsZero() {
			out[k] = at
		}
	}
	return out
}

// retire stops following keys, unless an edit of one began again.
func (b *configBook) retire(keys map[string]time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for k, at := range keys {
		if b.keys[k].Equal(at) {
			delete(b.keys, k)
		}
	}
}

// auditConfig checks that every key this Env saved and still follows is in
// the config file. A missing key is reported and no longer followed; a key
// found is no longer followed once it has been in the file for
// configSettle, or at once when final.
func (e *Env) auditConfig(final bool) error {
	keys := e.configKeys.savedKeys()
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
	now := time.Now()
	for k, at := range keys {
		_, ok := cfg[k]
		switch {
		case !ok:
			e.Rec.Violation(InvConfigKeys, "config:"+k, fmt.Sprintf("config key %s was saved and is gone: a concurrent edit overwrote it", k))
		case !final && now.Sub(at) < configSettle:
			delete(keys, k) // keep following it
		}
	}
	e.configKeys.retire(keys)
	return nil
}
