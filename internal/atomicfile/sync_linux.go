package atomicfile

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// syncDirFiles makes the files names in directory d, and d's entries,
// durable with one syncfs(2) of d's file system: it writes back every dirty
// page and commits the journal once, where an fsync per file commits it
// per file. Since Linux 5.8 syncfs reports a write-back error that happened
// on the file system after d was opened. Where syncfs is not available
// (ENOSYS, a seccomp filter), it falls back to an fsync per file.
func syncDirFiles(d *os.File, names []string) error {
	err := unix.Syncfs(int(d.Fd()))
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
		return fsyncFiles(d, names)
	}
	return err
}
