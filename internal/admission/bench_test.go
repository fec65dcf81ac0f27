package admission_test

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
)

// BenchmarkExplain runs the whole analysis (capacity table, dead-path
// search, findings) on the lab, read from CUE, and on generated policies of
// 10, 100 and 1,000 ClusterQueues (cohorts of ten, one card per cohort:
// 1,000 queues is 100 cards; 16 service states; one template per queue).
//
//	go test ./admission -run '^$' -bench Explain -benchmem
//
// Besides wall time it reports cpu-ms/op (user+system time of the process
// per run, from getrusage), which stays meaningful on a loaded machine.
func BenchmarkExplain(b *testing.B) {
	b.Run("lab", func(b *testing.B) {
		p := loadLab(b)
		b.ReportAllocs()
		start := cpuTime()
		for b.Loop() {
			if _, err := admission.Explain(p); err != nil {
				b.Fatal(err)
			}
		}
		reportCPU(b, start)
	})
	for _, n := range []int{10, 100, 1000} {
		p := admissiontest.Generated(n)
		b.Run(fmt.Sprintf("queues=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			var rows int
			start := cpuTime()
			for b.Loop() {
				r, err := admission.Explain(p)
				if err != nil {
					b.Fatal(err)
				}
				rows = len(r.Capacity)
			}
			reportCPU(b, start)
			b.ReportMetric(float64(rows), "rows")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
