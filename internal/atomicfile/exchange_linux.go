package atomicfile

import (
	"errors"

	"golang.org/x/sys/unix"
)

// exchange swaps two paths atomically (renameat2 RENAME_EXCHANGE).
func exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return errNoExchange // e.g. a file system without RENAME_EXCHANGE
	}
	return err
}
