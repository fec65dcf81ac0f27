package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Garbage collection for a short run. At Go's default (GOGC=100) a vet or
// render of the lab collects five times, three of them after start-up,
// while its live heap stays under 7 MiB, and the marking (on the otherwise
// idle CPU too) is a fifth of its CPU time. So gpupolicy collects at
// gcPercentSmall until the live heap first reaches gcSmallHeap, and at the
// default from then on: a bigger policy's peak heap is what GOGC=100 gives
// it once past the first collections (hack/bench-policy.sh: no change at
// 100 queues), the lab's vet and render take 10-20% less CPU. A GOGC in
// the environment is obeyed as set.
const (
	gcPercentSmall = 400
	gcSmallHeap    = 8 << 20 // bytes of live heap
)

func tuneGC() {
	if _, set := os.LookupEnv("GOGC"); set {
		return
	}
	debug.SetGCPercent(gcPercentSmall)
	watchHeap()
}

// watchHeap checks the live heap after each collection (a finalizer runs
// once per cycle that frees its object) and restores the default percent
// once it passes gcSmallHeap.
func watchHeap() {
	type sentinel struct{ _ [16]byte }
	runtime.SetFinalizer(new(sentinel), func(*sentinel) {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		if s[0].Value.Kind() == metrics.KindUint64 && s[0].Value.Uint64() >= gcSmallHeap {
			debug.SetGCPercent(100)
			return
		}
		watchHeap()
	})
}
