package verify

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOpenNVML: without the NVIDIA driver (or without the nvml build tag)
// OpenNVML returns an error that says why, and does not panic.
func TestOpenNVML(t *testing.T) {
	r, err := OpenNVML("")
	if err == nil {
		defer r.Close()
		ds, err := r.Read()
		if err != nil || len(ds) == 0 || ds[0].TotalMiB <= 0 {
			t.Fatalf("NVML opened but reads %v, %v", ds, err)
		}
		t.Logf("NVML present: %+v", ds)
		return
	}
	if !strings.HasPrefix(err.Error(), "NVML unavailable (") {
		t.Errorf("error %q does not start with \"NVML unavailable (\"", err)
	}
	if NVMLBuilt {
		if _, statErr := os.Stat("/dev/nvidiactl"); statErr != nil && !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") && !strings.Contains(err.Error(), "DRIVER_NOT_LOADED") {
			t.Errorf("no driver here, but the error is %q", err)
		}
		if _, err := OpenNVML("/nonexistent/libnvidia-ml.so.1"); err == nil || !strings.Contains(err.Error(), "ERROR_LIBRARY_NOT_FOUND") {
			t.Errorf("a library path that does not exist: %v", err)
		}
	} else if !strings.Contains(err.Error(), "built without NVML") {
		t.Errorf("built without the nvml tag, but the error is %q", err)
	}
	g := GPUMemory{Reason: err.Error()}
	if s := g.Sentence(); !strings.HasPrefix(s, "GPU memory not sampled: NVML unavailable (") {
		t.Errorf("sentence %q", s)
	}
	t.Logf("NVMLBuilt=%v: %v", NVMLBuilt, err)
}

// TestNVMLTagBuild runs TestOpenNVML in a test binary built with the nvml
// tag, so the real go-nvml path (nvml.Init without libnvidia-ml.so) is
// exercised too.
func TestNVMLTagBuild(t *testing.T) {
	if NVMLBuilt {
		t.Skip("already built with the nvml tag")
	}
	if testing.Short() {
		t.Skip("-short")
	}
	if out, err := exec.Command("go", "env", "CGO_ENABLED").Output(); err != nil || strings.TrimSpace(string(out)) != "1" {
		t.Skipf("cgo unavailable (%v): NVML needs it", err)
	}
	args := append([]string{"test", "-count=1", "-v", "-run", "^TestOpenNVML$"}, strings.Fields(NVMLBuildFlags)...)
	cmd := exec.Command("go", append(args, ".")...)
	cmd.Env = append(os.Environ(), "CGO_CFLAGS=-O2 -Wno-deprecated-declarations")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !strings.Contains(string(out), "NVMLBuilt=true") && !strings.Contains(string(out), "NVML present") {
		t.Errorf("the tagged test did not run with NVML built in:\n%s", out)
	}
}

type fakeMemory struct {
	mu    sync.Mutex
	used  int64
	fail  bool
	close bool
}

func (f *fakeMemory) Read() ([]DeviceMemory, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail {
		return nil, errors.New("GPU is lost")
	}
	return []DeviceMemory{{Index: 0, Name: "NVIDIA GeForce RTX 5060 Ti", UsedMiB: f.used, TotalMiB: 16311}}, nil
}

func (f *fakeMemory) Close() { f.close = true }

func (f *fakeMemory) set(v int64) {
	f.mu.Lock()
	f.used = v
	f.mu.Unlock()
}

func TestSampler(t *testing.T) {
	f := &fakeMemory{used: 2100}
	s := startSampler(f, 5*time.Millisecond)
	s.setBatch("level 1, batch 1")
	time.Sleep(30 * time.Millisecond)
	f.set(3636)
	s.setBatch("level 4, batch 1")
	time.Sleep(30 * time.Millisecond)
	f.set(2000)
	g := s.finish()
	if !g.Sampled || len(g.Devices) != 1 || g.Devices[0].PeakUsedMiB != 3636 || !f.close {
		t.Fatalf("%+v", g)
	}
	if len(g.Batches) != 2 || g.Batches[0].PeakUsedMiB != 2100 || g.Batches[1].PeakUsedMiB != 3636 {
		t.Errorf("per batch: %+v", g.Batches)
	}
	if s := g.Sentence(); !strings.Contains(s, "card 0 (NVIDIA GeForce RTX 5060 Ti) peaked at 3,636 MiB in use of 16,311 MiB") || !strings.Contains(s, "level 4, batch 1 3,636 MiB") {
		t.Errorf("sentence: %s", s)
	}
	bad := startSampler(&fakeMemory{fail: true}, 5*time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if g := bad.finish(); g.Sampled || !strings.Contains(g.Reason, "GPU is lost") {
		t.Errorf("failing reader: %+v", g)
	}
}

func TestRunnerSampler(t *testing.T) {
	r := &runner{o: Options{NoGPUMemory: true}, rep: &Report{}}
	r.startSampler()
	if r.sampler != nil || r.rep.GPUMemory.Reason != "sampling turned off" {
		t.Errorf("off: %+v", r.rep.GPUMemory)
	}
	r = &runner{o: Options{}, rep: &Report{}}
	r.startSampler() // the machine's NVML: absent here, present on a GPU node
	if r.sampler == nil && !strings.HasPrefix(r.rep.GPUMemory.Reason, "NVML unavailable (") {
		t.Errorf("no NVML: %+v", r.rep.GPUMemory)
	}
	if r.sampler != nil {
		r.sampler.finish()
	}
}
