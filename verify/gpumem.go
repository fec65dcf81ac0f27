package verify

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// GPUMemory is the card's memory in use while the jobs ran, sampled through
// NVML on the machine verify runs on (so only meaningful on the GPU node),
// or why it was not sampled.
type GPUMemory struct {
	Sampled bool `json:"sampled"`
	// Reason says why not, e.g. "NVML unavailable (ERROR_LIBRARY_NOT_FOUND)".
	Reason          string      `json:"reason,omitempty"`
	IntervalSeconds float64     `json:"intervalSeconds,omitempty"`
	Devices         []GPUDevice `json:"devices,omitempty"`
	// Batches is the peak in use (all devices together) during each batch.
	Batches []BatchPeak `json:"batches,omitempty"`
}

// GPUDevice is one card's peak.
type GPUDevice struct {
	Index       int    `json:"index"`
	Name        string `json:"name"`
	TotalMiB    int64  `json:"totalMiB"`
	PeakUsedMiB int64  `json:"peakUsedMiB"`
	Samples     int    `json:"samples"`
}

// BatchPeak is the most memory in use during one batch.
type BatchPeak struct {
	Batch       string `json:"batch"`
	PeakUsedMiB int64  `json:"peakUsedMiB"`
}

// Sentence is the report's line about GPU memory.
func (g GPUMemory) Sentence() string {
	if !g.Sampled {
		reason := g.Reason
		if reason == "" {
			reason = "sampling off"
		}
		return "GPU memory not sampled: " + reason + "."
	}
	var parts []string
	for _, d := range g.Devices {
		parts = append(parts, fmt.Sprintf("card %d (%s) peaked at %s MiB in use of %s MiB over %d samples",
			d.Index, d.Name, policy.Thousands(d.PeakUsedMiB), policy.Thousands(d.TotalMiB), d.Samples))
	}
	s := fmt.Sprintf("GPU memory, sampled through NVML every %s on the machine verify ran on: %s.", fmtSecs(g.IntervalSeconds), strings.Join(parts, "; "))
	if len(g.Batches) > 0 {
		var bs []string
		for _, b := range g.Batches {
			bs = append(bs, fmt.Sprintf("%s %s MiB", b.Batch, policy.Thousands(b.PeakUsedMiB)))
		}
		s += " Peak per batch: " + strings.Join(bs, ", ") + "."
	}
	return s
}

// DeviceMemory is one sample of one card.
type DeviceMemory struct {
	Index   int
	Name    string
	UsedMiB int64
	// TotalMiB is the card's memory.
	TotalMiB int64
}

// MemoryReader reads every card's memory in use.
type MemoryReader interface {
	Read() ([]DeviceMemory, error)
	Close()
}

// NVMLBuildFlags are the go build flags that put NVML in a binary.
//
// go-nvml's bindings leave every nvml* symbol undefined at link time and
// rely on lazy binding: libnvidia-ml.so.1 is dlopen'ed by nvml.Init. The Go
// linker asks for immediate binding (-z now) in any cgo binary that links
// the standard library's plugin package, which kustomize's plugin loader
// does, so a gpupolicy binary with go-nvml would die at start-up with
// "symbol lookup error: undefined symbol: nvml…" on every machine, driver
// or not (NVIDIA/go-nvml#18). The bindings therefore come only with the
// nvml build tag, and -z lazy must come with them; without the tag, verify
// reports that GPU memory was not sampled and why.
const NVMLBuildFlags = "-tags nvml -ldflags=-extldflags=-Wl,-z,lazy"

// OpenNVML opens NVML (libraryPath "" for the system's libnvidia-ml.so.1).
// Without the driver, or in a binary built without NVML (see
// NVMLBuildFlags), it returns an error saying so and never panics; the run
// then goes on without GPU memory.
func OpenNVML(libraryPath string) (MemoryReader, error) { return openNVML(libraryPath) }

// memorySampler samples a MemoryReader at an interval, attributing each
// sample to the batch that is running.
type memorySampler struct {
	reader   MemoryReader
	interval time.Duration

	mu      sync.Mutex
	batch   string
	devices map[int]*GPUDevice
	order   []int
	peaks   map[string]int64
	batches []string
	err     error

	stop chan struct{}
	done chan struct{}
}

func startSampler(r MemoryReader, interval time.Duration) *memorySampler {
	s := &memorySampler{reader: r, interval: interval, devices: map[int]*GPUDevice{}, peaks: map[string]int64{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *memorySampler) setBatch(label string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batch = label
	if _, ok := s.peaks[label]; !ok && label != "" {
		s.peaks[label] = 0
		s.batches = append(s.batches, label)
	}
}

func (s *memorySampler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sample()
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
	}
}

func (s *memorySampler) sample() {
	ds, err := s.reader.Read()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		return
	}
	total := int64(0)
	for _, d := range ds {
		g, ok := s.devices[d.Index]
		if !ok {
			g = &GPUDevice{Index: d.Index, Name: d.Name, TotalMiB: d.TotalMiB}
			s.devices[d.Index] = g
			s.order = append(s.order, d.Index)
		}
		g.Samples++
		g.PeakUsedMiB = max(g.PeakUsedMiB, d.UsedMiB)
		total += d.UsedMiB
	}
	if s.batch != "" {
		s.peaks[s.batch] = max(s.peaks[s.batch], total)
	}
}

// finish stops sampling and returns what was seen.
func (s *memorySampler) finish() GPUMemory {
	close(s.stop)
	<-s.done
	s.reader.Close()
	s.mu.Lock()
	defer s.mu.Unlock()
	g := GPUMemory{Sampled: true, IntervalSeconds: s.interval.Seconds()}
	for _, i := range s.order {
		g.Devices = append(g.Devices, *s.devices[i])
	}
	for _, b := range s.batches {
		g.Batches = append(g.Batches, BatchPeak{Batch: b, PeakUsedMiB: s.peaks[b]})
	}
	if len(g.Devices) == 0 {
		g.Sampled = false
		g.Reason = "NVML returned no sample"
		if s.err != nil {
			g.Reason += " (" + s.err.Error() + ")"
		}
	}
	return g
}
