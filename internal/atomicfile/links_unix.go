//go:build unix

package atomicfile

import (
	"os"
	"syscall"
)

// links is the number of hard links to the file fi describes (0 when
// unknown).
func links(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}
