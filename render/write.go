package render

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Write replaces dir with exactly files, atomically: it writes a sibling
// temporary directory, then swaps it into place with rename (on Linux an
// atomic exchange, so dir always exists). On any failure the previous dir is
// untouched and no temporary directory is left.
//
// File names must be plain base names. To protect a directory that is not a
// render, Write refuses to replace one that holds anything but .yaml files.
func Write(dir string, files map[string][]byte) error {
	if dir == "" {
		return errors.New("render: no output directory")
	}
	dir = filepath.Clean(dir)
	names := make([]string, 0, len(files))
	for name := range files {
		if name == "" || name == "." || name == ".." || name != filepath.Base(name) || strings.ContainsAny(name, `/\`) {
			return fmt.Errorf("render: %q is not a plain file name", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)

	exists, err := checkReplaceable(dir)
	if err != nil {
		return err
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return fmt.Errorf("render: %w", err)
	}
	// After a swap tmp holds the previous render; after a failure, the
	// partial new one. Either way it goes.
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	for _, name := range names {
		if err := writeFile(filepath.Join(tmp, name), files[name]); err != nil {
			return fmt.Errorf("render: writing %s: %w", name, err)
		}
	}
	if exists {
		err = swap(tmp, dir)
	} else {
		err = rename(tmp, dir)
	}
	if err != nil {
		return fmt.Errorf("render: replacing %s: %w", dir, err)
	}
	if err := syncDir(parent); err != nil {
		return fmt.Errorf("render: %w", err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("render: wrote %s, but could not remove the previous render in %s: %w", dir, tmp, err)
	}
	return nil
}

// checkReplaceable reports whether dir exists, and fails if it exists but is
// not a directory of .yaml files (a previous render).
func checkReplaceable(dir string) (bool, error) {
	info, err := os.Lstat(dir)
	if os.IsNotExist(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("render: %w", err)
	}
	if !info.IsDir() {
		return false, fmt.Errorf("render: %s exists and is not a directory", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("render: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || !strings.HasSuffix(e.Name(), ".yaml") {
			return false, fmt.Errorf("render: %s holds %s, which is not a rendered .yaml file; refusing to replace the directory", dir, e.Name())
		}
	}
	return true, nil
}

// Hooks, replaced in tests to make a write fail part-way.
var (
	writeFile    = writeFileSync
	rename       = os.Rename
	swap         = swapDirs
	exchangeDirs = exchange
)

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
}

// swapDirs makes next the content of dir and leaves dir's previous content
// at next. Where the platform has no atomic exchange it moves dir aside
// first, and moves it back if the second rename fails.
func swapDirs(next, dir string) error {
	if err := exchangeDirs(next, dir); err == nil || !errors.Is(err, errNoExchange) {
		return err
	}
	// A fresh name beside dir: MkdirTemp reserves it, and os.Rename will
	// not replace a directory, so free it again.
	old, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".old-")
	if err != nil {
		return err
	}
	if err := os.Remove(old); err != nil {
		return err
	}
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(next, dir); err != nil {
		if rerr := os.Rename(old, dir); rerr != nil {
			return fmt.Errorf("%w; and restoring the previous render from %s failed: %v", err, old, rerr)
		}
		return err
	}
	// next is gone; put the previous render where the caller removes it.
	return os.Rename(old, next)
}

var errNoExchange = errors.New("no atomic directory exchange")
