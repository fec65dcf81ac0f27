package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func gcPercent() uint64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// Tune collects at PercentSmall while the live heap is small and returns
// to the default once it passes SmallHeap; a GOGC in the environment wins.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))

	t.Setenv("GOGC", "100")
	Tune()
	if p := gcPercent(); p != 100 {
		t.Fatalf("with GOGC set, percent %d", p)
	}

	os.Unsetenv("GOGC") // t.Setenv restores it
	runtime.GC()        // a small live heap, below SmallHeap
	Tune()
	if p := gcPercent(); p != PercentSmall {
		t.Fatalf("percent %d, want %d", p, PercentSmall)
	}
	runtime.GC()
	time.Sleep(20 * time.Millisecond) // the finalizer's goroutine
	if p := gcPercent(); p != PercentSmall {
		t.Fatalf("after a collection of a small heap: percent %d, want still %d", p, PercentSmall)
	}

	live := make([][]byte, 0, 16)
	for range 2 * SmallHeap >> 20 {
		live = append(live, make([]byte, 1<<20))
	}
	deadline := time.Now().Add(5 * time.Second)
	for gcPercent() != 100 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if p := gcPercent(); p != 100 {
		t.Errorf("with %d MiB live: percent %d, want the default 100", len(live), p)
	}
	runtime.KeepAlive(live)
}
