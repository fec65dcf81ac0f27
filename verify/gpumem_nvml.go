//go:build cgo && nvml

package verify

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NVMLBuilt reports whether this binary carries the NVML bindings.
const NVMLBuilt = true

type nvmlReader struct {
	lib nvml.Interface
}

func openNVML(libraryPath string) (r MemoryReader, err error) {
	// go-nvml returns ERROR_LIBRARY_NOT_FOUND when libnvidia-ml.so is
	// absent; the recover is a second guard, since a missing symbol in an
	// old driver panics inside the bindings.
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("NVML unavailable (%v)", p)
		}
	}()
	var lib nvml.Interface
	if libraryPath != "" {
		lib = nvml.New(nvml.WithLibraryPath(libraryPath))
	} else {
		lib = nvml.New()
	}
	if ret := lib.Init(); ret != nvml.SUCCESS {
		why := nvml.ErrorString(ret)
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND {
			why += ": no NVIDIA driver library (libnvidia-ml.so.1) on this machine"
		}
		return nil, errors.New("NVML unavailable (" + why + ")")
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, errors.New("NVML unavailable (DeviceGetCount: " + nvml.ErrorString(ret) + ")")
	}
	if n == 0 {
		lib.Shutdown()
		return nil, errors.New("NVML unavailable (no GPU on this machine)")
	}
	return &nvmlReader{lib: lib}, nil
}

func (r *nvmlReader) Read() (out []DeviceMemory, err error) {
	defer func() {
		if p := recover(); p != nil {
			out, err = nil, fmt.Errorf("NVML: %v", p)
		}
	}()
	n, ret := r.lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, errors.New("NVML DeviceGetCount: " + nvml.ErrorString(ret))
	}
	for i := 0; i < n; i++ {
		dev, ret := r.lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, errors.New("NVML DeviceGetHandleByIndex: " + nvml.ErrorString(ret))
		}
		mem, ret := dev.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return nil, errors.New("NVML GetMemoryInfo: " + nvml.ErrorString(ret))
		}
		name, ret := dev.GetName()
		if ret != nvml.SUCCESS {
			name = "GPU"
		}
		out = append(out, DeviceMemory{Index: i, Name: name, UsedMiB: int64(mem.Used >> 20), TotalMiB: int64(mem.Total >> 20)})
	}
	return out, nil
}

func (r *nvmlReader) Close() {
	defer func() { _ = recover() }()
	r.lib.Shutdown()
}
