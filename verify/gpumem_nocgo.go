//go:build !cgo || !nvml

package verify

import "errors"

// NVMLBuilt reports whether this binary carries the NVML bindings.
const NVMLBuilt = false

func openNVML(string) (MemoryReader, error) {
	return nil, errors.New("NVML unavailable (this gpupolicy was built without NVML; build it with " + NVMLBuildFlags + ")")
}
