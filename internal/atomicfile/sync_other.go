//go:build !linux

package atomicfile

import "os"

// syncDirFiles makes the files names in directory d, and d's entries,
// durable: an fsync each (no syncfs here).
func syncDirFiles(d *os.File, names []string) error { return fsyncFiles(d, names) }
