// Package gctune sets the garbage collector for a short run of gpupolicy.
// cmd/gpupolicy imports it for its side effect only: its init runs Tune
// while the other packages are still being initialized, so that the
// collection Go's default (GOGC=100) starts during package init, at 4 MB
// of heap, does not happen.
//
// Go initializes, among the packages whose imports are initialized, the
// first in import-path order; this one imports only os, runtime,
// runtime/debug and runtime/metrics, and is initialized about halfway
// through the binary's some 440 packages (GODEBUG=inittrace=1), before the
// heap reaches 4 MB.
package gctune

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// At Go's default (GOGC=100) a vet or render of the lab collects five
// times, one during package init and three after start-up, while its live
// heap stays under 7 MiB, and the marking (on the otherwise idle CPU too)
// is a fifth of its CPU time. So gpupolicy collects at PercentSmall until
// the live heap first reaches SmallHeap, and at the default from then on.
// At 800 the first collection comes at 32 MB of heap (Go's 4 MB minimum
// scales with the percent): a vet or render of the lab, some 16 MB
// allocated in all, runs without one; at 400, set in main after package
// init (until issue 17), the lab paid the collection during init and often
// one more at 16 MB, 5 MB live: measured side by side, vet 45 → 40 ms and
// render 56 → 48 ms of CPU. A bigger policy's peak heap is what GOGC=100
// gives it once past the first collections (hack/genpolicy, 100 and 300
// queues: peak RSS within ±12 MB of the 400 set in main). A GOGC in the
// environment is obeyed as set.
const (
	PercentSmall = 800
	SmallHeap    = 8 << 20 // bytes of live heap
)

func init() { Tune() }

// Tune sets the collector's percent to PercentSmall, and back to the
// default once a collection finds SmallHeap or more live; it does nothing
// when GOGC is set in the environment.
func Tune() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(PercentSmall)
	watchHeap()
}

// watchHeap checks the live heap after each collection (a finalizer runs
// once per cycle that frees its object) and restores the default percent
// once it passes SmallHeap.
func watchHeap() {
	type sentinel struct{ _ [16]byte }
	runtime.SetFinalizer(new(sentinel), func(*sentinel) {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() >= SmallHeap {
			debug.SetGCPercent(100)
			return
		}
		watchHeap()
	})
}
