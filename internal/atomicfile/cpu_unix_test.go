//go:build unix

package atomicfile

import (
	"syscall"
	"time"
)

// processCPU is the CPU time (user + system) this process has used.
func processCPU() time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}
