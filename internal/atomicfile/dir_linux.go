package atomicfile

import (
	"bytes"
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// dirHandle is an open directory whose files are opened, created and
// linked relative to its descriptor (openat(2), linkat(2)): a few plain
// system calls a file, without the path walk and the runtime poller's
// fcntl/epoll calls of os.OpenFile, which cost more than the write at
// thousands of files.
type dirHandle struct {
	*os.File
	fd int
	// umask is what create learnt from the first file it made: whether
	// the process umask keeps mode 0644 as it is (then no file needs an
	// fchmod(2)) or masks some of its bits (then each does).
	umask umaskEffect
}

type umaskEffect uint8

const (
	umaskUnknown umaskEffect = iota
	umaskKeeps0644
	umaskMasks0644
)

func openDir(path string) (*dirHandle, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &dirHandle{File: f, fd: int(f.Fd())}, nil
}

// fileID identifies the content of a file read: the inode, and its size and
// modification time then.
type fileID struct {
	dev, ino uint64
	size     int64
	mtime    unix.Timespec
}

func idOf(st *unix.Stat_t) fileID {
	return fileID{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim}
}

// readPrevious opens the file name of d (not following a symbolic link,
// not waiting on a FIFO) and reads it once: in full when inNew and it is a
// regular file of mode 0644 with one link and the size of want, else its
// first headLen bytes. It returns those first bytes (none when the file
// cannot be read), whether the file holds exactly want (same) and then
// id, and buf, the read buffer, grown as needed, for the next call.
func (d *dirHandle) readPrevious(name string, want []byte, inNew bool, headLen int, buf []byte) (head []byte, id fileID, same bool, _ []byte) {
	fd, err := retry(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	})
	if err != nil {
		return nil, id, false, buf
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, id, false, buf
	}
	n := headLen
	candidate := inNew && st.Mode&0o7777 == 0o644 && st.Nlink == 1 && st.Size == int64(len(want))
	if candidate {
		n = max(n, len(want))
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	got, err := readFull(fd, buf[:n])
	if err != nil {
		return nil, id, false, buf
	}
	head = buf[:min(got, headLen)]
	if candidate && got == len(want) && bytes.Equal(buf[:got], want) {
		return head, idOf(&st), true, buf
	}
	return head, id, false, buf
}

// readFull reads into b until it is full or the file ends, and returns
// how many bytes it read.
func readFull(fd int, b []byte) (int, error) {
	got := 0
	for got < len(b) {
		n, err := unix.Read(fd, b[got:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return got, err
		}
		if n == 0 {
			break
		}
		got += n
	}
	return got, nil
}

// create makes the file name in d, which must not exist, with mode 0644
// whatever the umask, holding b; unsynced. The first file's mode tells
// whether the umask masked any of 0644's bits; only then are the files
// chmodded.
func (d *dirHandle) create(name string, b []byte) error {
	fd, err := retry(func() (int, error) {
		return unix.Openat(d.fd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o644)
	})
	if err != nil {
		return &os.PathError{Op: "open", Path: name, Err: err}
	}
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "write", Path: name, Err: err}
		}
		b = b[n:]
	}
	if d.umask == umaskUnknown {
		d.umask = umaskMasks0644
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err == nil && st.Mode&0o7777 == 0o644 {
			d.umask = umaskKeeps0644
		}
	}
	if d.umask == umaskMasks0644 {
		if err := ignoringEINTR(func() error { return unix.Fchmod(fd, 0o644) }); err != nil {
			unix.Close(fd)
			return &os.PathError{Op: "chmod", Path: name, Err: err}
		}
	}
	if err := unix.Close(fd); err != nil {
		return &os.PathError{Op: "close", Path: name, Err: err}
	}
	return nil
}

// link hard-links the file name of prev into d under the same name when it
// is still the file id read and nothing else has linked it since; on false
// d has no file name.
func (d *dirHandle) link(prev *dirHandle, name string, id fileID) bool {
	if err := ignoringEINTR(func() error { return unix.Linkat(prev.fd, name, d.fd, name, 0) }); err != nil {
		return false
	}
	var st unix.Stat_t
	if err := unix.Fstatat(d.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil || idOf(&st) != id || st.Nlink != 2 {
		unix.Unlinkat(d.fd, name, 0)
		return false
	}
	return true
}

func retry(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

func ignoringEINTR(f func() error) error {
	for {
		if err := f(); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// chmodDir sets the mode of the directory at path, never through a
// symbolic link (O_NOFOLLOW|O_DIRECTORY, then fchmod(2)).
func chmodDir(path string, mode os.FileMode) error {
	fd, err := retry(func() (int, error) {
		return unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	})
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fchmod(fd, uint32(mode.Perm()))
}
