package main

import (
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// profiler writes Go pprof profiles of one run, for hack/bench-policy.sh's
// figures and `go tool pprof`: --cpuprofile FILE (CPU samples from the
// verb's start to its end) and --memprofile FILE (the heap's allocations,
// written at the end). Both flags are hidden: they are for whoever tunes
// gpupolicy, not part of the CLI's contract.
type profiler struct {
	cpu, mem string
	cpuFile  *os.File
}

// register adds the hidden persistent flags to root and starts the CPU
// profile before any verb runs.
func (p *profiler) register(root *cobra.Command) {
	fs := root.PersistentFlags()
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile to `FILE` (go tool pprof)")
	fs.StringVar(&p.mem, "memprofile", "", "write an allocation profile to `FILE` (go tool pprof)")
	_ = fs.MarkHidden("cpuprofile")
	_ = fs.MarkHidden("memprofile")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return p.start() }
}

func (p *profiler) start() error {
	if p.cpu == "" {
		return nil
	}
	f, err := os.Create(p.cpu)
	if err != nil {
		return usageError{fmt.Errorf("--cpuprofile: %w", err)}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return usageError{fmt.Errorf("--cpuprofile: %w", err)}
	}
	p.cpuFile = f
	return nil
}

// stop ends the CPU profile and writes the allocation profile; the verb's
// outcome (its exit code) does not depend on it, a failure is printed on
// stderr.
func (p *profiler) stop(stderr io.Writer) {
	if p.cpuFile != nil {
		pprof.StopCPUProfile()
		if err := p.cpuFile.Close(); err != nil {
			fmt.Fprintln(stderr, "--cpuprofile:", err)
		}
		p.cpuFile = nil
	}
	if p.mem == "" {
		return
	}
	f, err := os.Create(p.mem)
	if err == nil {
		err = pprof.Lookup("allocs").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "--memprofile:", err)
	}
}
