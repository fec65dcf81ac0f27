//go:build !unix

package atomicfile

import "time"

// processCPU is unknown here (0): the benchmark's cpu-ms/op reads 0.
func processCPU() time.Duration { return 0 }
