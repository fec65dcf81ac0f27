// Package atomicfile writes files and directories atomically: the content
// goes to a temporary sibling that is synced and then renamed (for a
// directory, exchanged) into place, so a reader, or a failed or killed run,
// sees either the previous content or the new one, never a mix.
//
// A directory is synced once, when all its files are written (on Linux one
// syncfs(2) of its file system; elsewhere an fsync per file), not file by
// file: a render of 2,000 files paid 2,000 journal commits before.
//
// The temporaries are named after what they replace, ".NAME.tmp-N" (and
// ".NAME.old-N" while a directory is moved aside where the platform has no
// atomic exchange), so that the next write of NAME can find and remove what
// a killed one left (RemoveStale) without touching anything else.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// WriteFile replaces the file at path with data through a temporary
// sibling, synced, then renamed over it. An existing file keeps its
// permission bits; a new one gets perm. On failure path is unchanged and no
// temporary is left. Temporaries an earlier, killed write left beside path
// are removed first.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	if err := RemoveStale(path); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), tempPrefix(path))
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := writeSynced(tmp, data, perm); err != nil {
		return err
	}
	if err := rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func writeSynced(f *os.File, data []byte, perm os.FileMode) error {
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// ReplaceDir replaces dir with a directory (mode 0755) holding exactly
// files (mode 0644), creating dir's parents when needed. File names must be
// plain base names. The new directory is written beside dir, made durable
// with one sync once every file is written (syncWritten), and swapped in
// with one rename (on Linux an atomic exchange, so dir always exists), whose
// parent is synced last; on any failure dir is untouched and no temporary
// directory is left. Temporaries an earlier, killed ReplaceDir of dir left
// are removed first.
//
// A file whose content dir already holds, in a file of mode 0644 that
// nothing else links to, is hard-linked into the new directory rather than
// written again (linkUnchanged): a re-render of 2,000 files where few
// changed creates few inodes. Its previous content is never written to, so
// a failure still leaves dir as it was. Only a previous file of the new
// one's size is read, once. A dir that already holds exactly files, so
// linked, and nothing else, in mode 0755, is left as it is, only synced:
// a re-render that changed nothing writes nothing.
func ReplaceDir(dir string, files map[string][]byte) error {
	_, err := ReplaceDirChecked(dir, files, 0, nil)
	return err
}

// ReplaceDirChecked is ReplaceDir that first asks check about every entry
// dir holds, when it exists: the entry's name, its type (the fs.ModeType
// bits: 0 for a regular file) and, for a regular file, its first headLen
// bytes (fewer when the file is shorter, none when it cannot be read; valid
// only during the call). An error from check refuses the replace: it is
// returned as it is, before the new directory is made, and dir is
// untouched; when check refuses several entries, their errors are joined
// (errors.Join), in name order, the first 20. Each previous file is opened and read
// once, for check and for linkUnchanged alike. replaced is false when dir
// already held exactly files and was left as it was (ReplaceDir), or on an
// error.
func ReplaceDirChecked(dir string, files map[string][]byte, headLen int, check func(name string, typ fs.FileMode, head []byte) error) (replaced bool, err error) {
	if dir == "" {
		return false, errors.New("no directory")
	}
	dir = filepath.Clean(dir)
	names := make([]string, 0, len(files))
	for name := range files {
		if name == "" || name == "." || name == ".." || name != filepath.Base(name) || strings.ContainsAny(name, `/\`) {
			return false, fmt.Errorf("%q is not a plain file name", name)
		}
		names = append(names, name)
	}
	sort.Strings(names)

	info, err := os.Lstat(dir)
	exists := err == nil
	switch {
	case err != nil && !os.IsNotExist(err):
		return false, err
	case exists && info.Mode()&fs.ModeSymlink != 0:
		// Replacing it would put a directory in the link's place.
		return false, fmt.Errorf("%s is a symbolic link: give the directory itself", dir)
	case exists && !info.IsDir():
		return false, fmt.Errorf("%s exists and is not a directory", dir)
	}
	// The previous files worth linking, each read once (and checked)
	// before anything is written.
	var prev *dirHandle
	var unchanged map[string]fileID
	var entries int
	if exists {
		if prev, err = openDir(dir); err != nil {
			return false, err
		}
		defer prev.Close()
		if unchanged, entries, err = scanPrevious(prev, files, headLen, check); err != nil {
			return false, err
		}
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, err
	}
	if err := RemoveStale(dir); err != nil {
		return false, err
	}
	if exists && info.Mode().Perm() == 0o755 && entries == len(names) && len(unchanged) == len(names) {
		// dir already holds exactly files, each of mode 0644 with no
		// other link, and nothing else: nothing to replace (a re-render
		// that changed nothing writes nothing). Synced as a replace would
		// be, in case what wrote it was not.
		if err := syncWritten(prev.File, names); err != nil {
			return false, fmt.Errorf("syncing %s: %w", dir, err)
		}
		return false, nil
	}
	tmp, err := os.MkdirTemp(parent, tempPrefix(dir))
	if err != nil {
		return false, err
	}
	// After a swap tmp holds the previous directory; after a failure, the
	// partial new one. Either way it goes.
	defer removeTree(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return false, err
	}
	// Opened before the first file is written, so that the sync reports a
	// write-back error of any of them (syncfs reports the errors since the
	// descriptor was opened); the files are made relative to it.
	d, err := openDir(tmp)
	if err != nil {
		return false, err
	}
	defer d.Close()
	for _, name := range names {
		if id, ok := unchanged[name]; ok && linkUnchanged(prev, d, name, id) {
			continue
		}
		if err := writeFile(d, name, files[name]); err != nil {
			return false, fmt.Errorf("writing %s: %w", name, err)
		}
	}
	if err := syncWritten(d.File, names); err != nil {
		return false, fmt.Errorf("syncing %s: %w", tmp, err)
	}
	if exists {
		err = swap(tmp, dir)
	} else {
		err = rename(tmp, dir)
	}
	if err != nil {
		return false, fmt.Errorf("replacing %s: %w", dir, err)
	}
	if err := syncDir(parent); err != nil {
		return false, err
	}
	if err := removeTree(tmp); err != nil {
		return false, fmt.Errorf("wrote %s, but could not remove the previous content in %s: %w", dir, tmp, err)
	}
	return true, nil
}

// removeTree is os.RemoveAll of a tree this package replaced or left, which
// it may find read-only (a user's chmod 555 of the render folder it swapped
// out): on a permission error it makes every directory of the tree
// writable by its owner, as rm -rf's user would, and removes it again.
func removeTree(path string) error {
	err := os.RemoveAll(path)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			if info, ierr := d.Info(); ierr == nil {
				// Never through a link swapped in since the walk read
				// the folder (chmodDir does not follow one); best
				// effort: RemoveAll says what is left.
				chmodDir(p, info.Mode().Perm()|0o700)
			}
		}
		return nil
	})
	return os.RemoveAll(path)
}

// maxRefused is how many refusals of check scanPrevious reports before it
// stops reading (a --out of a home folder would list thousands).
const maxRefused = 20

// scanPrevious reads the directory prev that is being replaced, once: it
// asks check (when not nil) about every entry, and returns the files that
// hold exactly what files gives them, in a file of mode 0644 with no other
// link, for linkUnchanged, and how many entries prev holds. A regular file
// is opened only when check needs its head or files has its name, and read
// in full only when it has the new file's size.
func scanPrevious(prev *dirHandle, files map[string][]byte, headLen int, check func(string, fs.FileMode, []byte) error) (map[string]fileID, int, error) {
	entries, err := prev.ReadDir(-1)
	if err != nil {
		return nil, 0, err
	}
	// In name order, as os.ReadDir gives them: what check refuses is
	// reported in an order that does not depend on the file system.
	slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	if check == nil {
		headLen = 0
	}
	unchanged := map[string]fileID{}
	var refused []error // what check refuses, up to maxRefused
	var buf []byte      // reused: the largest file read so far
	for _, e := range entries {
		if len(refused) == maxRefused {
			refused = append(refused, fmt.Errorf("(and perhaps more: stopped after %d)", maxRefused))
			break
		}
		name, typ := e.Name(), e.Type()
		want, inNew := files[name]
		var head []byte
		if typ.IsRegular() && (inNew || check != nil) {
			var id fileID
			var same bool
			head, id, same, buf = prev.readPrevious(name, want, inNew, headLen, buf)
			if same {
				unchanged[name] = id
			}
		}
		if check != nil {
			if err := check(name, typ, head); err != nil {
				refused = append(refused, err)
			}
		}
	}
	if len(refused) == 1 {
		return nil, 0, refused[0] // as check gave it
	}
	if len(refused) > 1 {
		return nil, 0, errors.Join(refused...)
	}
	return unchanged, len(entries), nil
}

// tempPrefix is the os.CreateTemp / os.MkdirTemp pattern of path's
// temporaries: ".NAME.tmp-" and a number.
func tempPrefix(path string) string { return "." + filepath.Base(path) + ".tmp-" }

// oldPrefix names where swapDirs moves a directory aside.
func oldPrefix(path string) string { return "." + filepath.Base(path) + ".old-" }

// RemoveStale removes the temporaries that a killed WriteFile or ReplaceDir
// of path left beside it: ".NAME.tmp-N", and ".NAME.old-N" when path
// exists (when it does not, an ".old-" directory is the only copy of the
// previous content, and it is left for a person to restore). Nothing else
// is touched, not even ".NAME.tmp-x" for a non-numeric x.
func RemoveStale(path string) error {
	parent := filepath.Dir(path)
	entries, err := os.ReadDir(parent)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	_, statErr := os.Lstat(path)
	tmpRE := staleRE(tempPrefix(path))
	oldRE := staleRE(oldPrefix(path))
	for _, e := range entries {
		n := e.Name()
		if !tmpRE.MatchString(n) && !(statErr == nil && oldRE.MatchString(n)) {
			continue
		}
		if err := removeTree(filepath.Join(parent, n)); err != nil {
			return fmt.Errorf("removing %s, left by an interrupted write: %w", filepath.Join(parent, n), err)
		}
	}
	return nil
}

// staleRE matches what os.CreateTemp and os.MkdirTemp make of prefix: the
// prefix and a decimal number.
func staleRE(prefix string) *regexp.Regexp {
	return regexp.MustCompile(`^` + regexp.QuoteMeta(prefix) + `[0-9]+$`)
}

// Hooks, replaced in tests to make a write fail part-way.
var (
	writeFile    = writeNew
	syncWritten  = syncDirFiles
	rename       = os.Rename
	swap         = swapDirs
	exchangeDirs = exchange
)

// writeNew creates the file name in directory d (mode 0644, whatever the
// umask) with b, unsynced: ReplaceDir syncs the whole directory once
// (syncWritten).
func writeNew(d *dirHandle, name string, b []byte) error { return d.create(name, b) }

// linkUnchanged hard-links the file name of directory prev, which
// scanPrevious found holding exactly the new content (a regular file of
// mode 0644 with no other link: a hard link elsewhere, say a backup made
// with cp -l, would otherwise share the new render's file and could change
// it), into directory next, when it is still the file id that was read. It
// reports whether next now holds it; on false, next has no file name. Any
// failure (no hard links on this file system, not the owner under
// fs.protected_hardlinks) is a false: the caller writes the file instead.
func linkUnchanged(prev, next *dirHandle, name string, id fileID) bool {
	return next.link(prev, name, id)
}

// fsyncFiles makes the files names in directory d, and d's entries,
// durable: an fsync each.
func fsyncFiles(d *os.File, names []string) error {
	for _, name := range names {
		f, err := os.Open(filepath.Join(d.Name(), name))
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if err := d.Sync(); err != nil && !errors.Is(err, os.ErrInvalid) {
		return err
	}
	return nil
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
	old, err := os.MkdirTemp(filepath.Dir(dir), oldPrefix(dir))
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
			return fmt.Errorf("%w; and restoring the previous content from %s failed: %v", err, old, rerr)
		}
		return err
	}
	// next is gone; put the previous content where the caller removes it.
	return os.Rename(old, next)
}

var errNoExchange = errors.New("no atomic directory exchange")
