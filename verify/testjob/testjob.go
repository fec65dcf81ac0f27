// Package testjob holds the lab's smallest GPU job, the one gpupolicy
// verify runs through the real GPU step template: a 4096×4096 float32
// matrix multiply and a tiny in-process language model's forward pass on the
// GPU, each checked against a float64 CPU reference (relative error ≤ 1e-3
// with TF32 off). It prints one JSON line with its own start and end stamps
// and GPU timings, then holds the GPU idle for --hold seconds. For verify
// --faults it can crash mid-run (--crash-after) or allocate GPU memory
// beyond its declaration (--allocate-mib).
//
// The script ships to pods in a ConfigMap (ConfigMapName, key ScriptKey, in
// each job namespace) mounted at MountDir; Command is the container command
// that runs it.
package testjob

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Script is gpu_test_job.py.
//
//go:embed gpu_test_job.py
var Script string

const (
	// ConfigMapName is the ConfigMap that carries the script, one in each
	// job namespace (the render ships it; verify creates a run-scoped copy
	// when it is absent or differs from Script).
	ConfigMapName = "gpupolicy-test-job"
	// ScriptKey is the ConfigMap key holding Script.
	ScriptKey = "gpu_test_job.py"
	// MountDir is where the ConfigMap is mounted in the job's container.
	MountDir = "/opt/gpupolicy-test-job"
	// VolumeName is the pod volume that carries the ConfigMap.
	VolumeName = "gpupolicy-test-job"
	// HoldEnv is the environment variable the script reads when --hold is
	// not given.
	HoldEnv = "GPUPOLICY_TEST_HOLD"

	// MatmulBound and LMBound are the relative-error bounds the script
	// checks: max|got − ref| / max|ref| against a float64 CPU reference.
	MatmulBound = 1e-3
	LMBound     = 1e-3
)

// ScriptPath is the script's path inside the container.
const ScriptPath = MountDir + "/" + ScriptKey

// CrashExitCode is the test job's exit code when it crashes on purpose
// (--crash-after): Python's for an uncaught exception.
const CrashExitCode = 1

// Command is the container command that runs the script and then holds the
// GPU for hold; faults adds the fault flags (CrashArgs, AllocateArgs).
func Command(hold time.Duration, faults ...string) []string {
	return append([]string{"python3", ScriptPath, "--hold", seconds(hold)}, faults...)
}

// CrashArgs make the job crash after seconds after its checks, instead of
// holding: an uncaught exception, exit CrashExitCode.
func CrashArgs(after time.Duration) []string { return []string{"--crash-after", seconds(after)} }

// AllocateArgs make the job allocate mib MiB more on the GPU after its
// checks and keep them through the hold (beyond what it declares; nothing
// on the CPU path).
func AllocateArgs(mib int64) []string {
	return []string{"--allocate-mib", strconv.FormatInt(mib, 10)}
}

func seconds(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) }

// Result is the script's JSON line.
type Result struct {
	Device       string  `json:"device"`
	DeviceName   string  `json:"device_name,omitempty"`
	Note         string  `json:"note,omitempty"`
	Launched     float64 `json:"launched"`
	Start        float64 `json:"start"`
	End          float64 `json:"end"`
	MatmulN      int     `json:"matmul_n"`
	MatmulS      float64 `json:"matmul_s"`
	MatmulRelErr float64 `json:"matmul_rel_err"`
	MatmulBound  float64 `json:"matmul_bound"`
	LMS          float64 `json:"lm_s"`
	LMRelErr     float64 `json:"lm_rel_err"`
	LMBound      float64 `json:"lm_bound"`
	TF32         bool    `json:"tf32"`
	Torch        string  `json:"torch"`
	Host         string  `json:"host"`
	HoldS        float64 `json:"hold_s"`
	OK           bool    `json:"ok"`
	// GPUMemAllocatedMiB is PyTorch's peak allocation on the card (CUDA only).
	GPUMemAllocatedMiB float64 `json:"gpu_mem_allocated_mib,omitempty"`
	// CrashAfterS is --crash-after: the job crashes that long after its
	// checks.
	CrashAfterS *float64 `json:"crash_after_s,omitempty"`
	// AllocatedExtraMiB is what --allocate-mib allocated on the card;
	// AllocNote says why nothing was (the CPU path), AllocError why the
	// allocation failed (out of memory).
	AllocatedExtraMiB float64 `json:"allocated_extra_mib,omitempty"`
	AllocNote         string  `json:"alloc_note,omitempty"`
	AllocError        string  `json:"alloc_error,omitempty"`
}

// StartTime and EndTime convert the job's own stamps.
func (r Result) StartTime() time.Time { return unix(r.Start) }

// EndTime is when the job's work (not its hold) ended.
func (r Result) EndTime() time.Time { return unix(r.End) }

func unix(s float64) time.Time {
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(frac*1e9))
}

// Check reports why a result is not a pass: ok false, an error over its
// bound, or a missing field.
func (r Result) Check() error {
	var errs []error
	if r.Device != "cuda" && r.Device != "cpu" {
		errs = append(errs, fmt.Errorf("device %q, want cuda or cpu", r.Device))
	}
	if r.Start <= 0 || r.End < r.Start {
		errs = append(errs, fmt.Errorf("stamps start=%v end=%v are not a run", r.Start, r.End))
	}
	if !(r.MatmulRelErr <= MatmulBound) {
		errs = append(errs, fmt.Errorf("matmul relative error %g over the bound %g", r.MatmulRelErr, MatmulBound))
	}
	if !(r.LMRelErr <= LMBound) {
		errs = append(errs, fmt.Errorf("language-model relative error %g over the bound %g", r.LMRelErr, LMBound))
	}
	if !r.OK {
		errs = append(errs, errors.New("the job reported ok: false"))
	}
	return errors.Join(errs...)
}

// ParseLog finds the script's JSON line in a container log (the last line
// that decodes as a Result with a device) and returns it.
func ParseLog(log string) (Result, error) {
	var found *Result
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if !strings.HasPrefix(line, "{") {
			continue
		}
		var r Result
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Device == "" {
			continue
		}
		found = &r
	}
	if found == nil {
		return Result{}, errors.New("no test-job JSON line in the log")
	}
	return *found, nil
}
