//go:build !linux

package atomicfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// dirHandle is an open directory; here its files are opened, created and
// linked by path.
type dirHandle struct {
	*os.File
	path string
}

func openDir(path string) (*dirHandle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &dirHandle{File: f, path: path}, nil
}

// fileID identifies the file read: its FileInfo then.
type fileID struct{ fi os.FileInfo }

// readPrevious reads the file name of d once: in full when inNew and it is
// a regular file of mode 0644 with one link and the size of want, else its
// first headLen bytes. It returns those first bytes (none when the file
// cannot be read), whether the file holds exactly want (same) and then
// id, and buf, the read buffer, grown as needed, for the next call.
func (d *dirHandle) readPrevious(name string, want []byte, inNew bool, headLen int, buf []byte) (head []byte, id fileID, same bool, _ []byte) {
	f, err := os.OpenFile(filepath.Join(d.path, name), os.O_RDONLY, 0)
	if err != nil {
		return nil, id, false, buf
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, id, false, buf
	}
	n := headLen
	candidate := inNew && fi.Mode().Perm() == 0o644 && links(fi) == 1 && fi.Size() == int64(len(want))
	if candidate {
		n = max(n, len(want))
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	got, err := io.ReadFull(f, buf[:n])
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return nil, id, false, buf
	}
	head = buf[:min(got, headLen)]
	if candidate && got == len(want) && bytes.Equal(buf[:got], want) {
		return head, fileID{fi}, true, buf
	}
	return head, id, false, buf
}

// create makes the file name in d, which must not exist, with mode 0644
// whatever the umask, holding b; unsynced.
func (d *dirHandle) create(name string, b []byte) error {
	f, err := os.OpenFile(filepath.Join(d.path, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// link hard-links the file name of prev into d under the same name when it
// is still the file id read and nothing else has linked it since; on false
// d has no file name.
func (d *dirHandle) link(prev *dirHandle, name string, id fileID) bool {
	next := filepath.Join(d.path, name)
	if err := os.Link(filepath.Join(prev.path, name), next); err != nil {
		return false
	}
	ni, err := os.Lstat(next)
	if err != nil || !os.SameFile(id.fi, ni) || ni.Size() != id.fi.Size() || !ni.ModTime().Equal(id.fi.ModTime()) || links(ni) != 2 {
		os.Remove(next)
		return false
	}
	return true
}

// chmodDir sets the mode of the directory at path when it is one (Lstat:
// not through a symbolic link; the O_NOFOLLOW open of the Linux version is
// not portable).
func chmodDir(path string, mode os.FileMode) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s is not a directory", path)
	}
	return os.Chmod(path, mode.Perm())
}
