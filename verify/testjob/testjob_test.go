package testjob

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// systemPython is Debian's interpreter, where python3-torch installs; a
// pyenv python3 earlier on PATH would not see it.
const systemPython = "/usr/bin/python3"

func needTorch(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(systemPython); err != nil {
		t.Skipf("%s absent: %v", systemPython, err)
	}
	out, err := exec.Command(systemPython, "-c", "import torch").CombinedOutput()
	if err != nil {
		t.Skipf("%s lacks torch (apt-get install -y python3-torch): %v: %s", systemPython, err, bytes.TrimSpace(out))
	}
}

// TestScriptCPU runs the real script on the CPU path with --hold 0 and checks
// its one JSON line: every key, ok, and both errors within their bounds.
func TestScriptCPU(t *testing.T) {
	needTorch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, systemPython, "gpu_test_job.py", "--cpu", "--hold", "0", "--matmul-n", "1024")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	before := float64(time.Now().UnixNano()) / 1e9
	if err := cmd.Run(); err != nil {
		t.Fatalf("script failed: %v\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	after := float64(time.Now().UnixNano()) / 1e9
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("want exactly one stdout line, got %d:\n%s", len(lines), stdout.String())
	}
	var raw map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &raw); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, lines[0])
	}
	for _, k := range []string{"device", "note", "launched", "start", "end", "matmul_n", "matmul_s", "lm_s",
		"matmul_rel_err", "lm_rel_err", "matmul_bound", "lm_bound", "tf32", "torch", "hold_s", "ok"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("JSON line lacks %q: %s", k, lines[0])
		}
	}
	r, err := ParseLog(stdout.String())
	if err != nil {
		t.Fatal(err)
	}
	if r.Device != "cpu" || r.Note == "" {
		t.Errorf("device=%q note=%q, want the CPU path said so", r.Device, r.Note)
	}
	if err := r.Check(); err != nil {
		t.Errorf("check: %v", err)
	}
	// 1024 keeps the CPU test fast on two shared cores (4096 takes minutes
	// there); the default, 4096, is checked in TestEmbeddedScriptIsTheFile.
	if r.MatmulN != 1024 {
		t.Errorf("matmul_n = %d, want 1024", r.MatmulN)
	}
	if r.MatmulBound != MatmulBound || r.LMBound != LMBound {
		t.Errorf("bounds in the script (%g, %g) differ from the Go constants (%g, %g)", r.MatmulBound, r.LMBound, MatmulBound, LMBound)
	}
	// Float32 against float64: far inside the bound, and not zero (a zero
	// would mean the "device" result was the reference itself).
	if r.MatmulRelErr <= 0 || r.MatmulRelErr > 1e-4 {
		t.Errorf("matmul_rel_err = %g, want in (0, 1e-4] for float32 vs float64", r.MatmulRelErr)
	}
	if r.LMRelErr <= 0 || r.LMRelErr > 1e-4 {
		t.Errorf("lm_rel_err = %g, want in (0, 1e-4] for float32 vs float64", r.LMRelErr)
	}
	if !(before <= r.Launched && r.Launched <= r.Start && r.Start <= r.End && r.End <= after) {
		t.Errorf("stamps out of order: before %.3f launched %.3f start %.3f end %.3f after %.3f", before, r.Launched, r.Start, r.End, after)
	}
	if r.MatmulS <= 0 || r.LMS <= 0 || r.HoldS != 0 || r.TF32 {
		t.Errorf("timings/hold/tf32 wrong: %+v", r)
	}
}

// TestScriptHold checks that the script holds for --hold, and that the
// environment variable is the fallback.
func TestScriptHold(t *testing.T) {
	needTorch(t)
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--hold", "2s"}, ""},
		{"env", nil, HoldEnv + "=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(systemPython, append([]string{"gpu_test_job.py", "--cpu", "--matmul-n", "256"}, tc.args...)...)
			cmd.Env = os.Environ()
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			done := float64(time.Now().UnixNano()) / 1e9
			r, err := ParseLog(string(out))
			if err != nil {
				t.Fatal(err)
			}
			if r.HoldS != 2 {
				t.Errorf("hold_s = %v, want 2", r.HoldS)
			}
			if done-r.End < 2 {
				t.Errorf("exited %.2f s after its end stamp, want ≥ 2 s of hold", done-r.End)
			}
		})
	}
}

func TestScriptBadHold(t *testing.T) {
	needTorch(t)
	err := exec.Command(systemPython, "gpu_test_job.py", "--hold", "soon").Run()
	var ee *exec.ExitError
	if !asExit(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("--hold soon: %v, want exit 2", err)
	}
}

func asExit(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}

func TestEmbeddedScriptIsTheFile(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(".", ScriptKey))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != Script {
		t.Fatal("Script differs from gpu_test_job.py")
	}
	for _, want := range []string{"MATMUL_N = 4096\n", "MATMUL_BOUND = 1e-3\n", "LM_BOUND = 1e-3\n", "allow_tf32 = False"} {
		if !strings.Contains(Script, want) {
			t.Errorf("the script lacks %q", want)
		}
	}
}

func TestParseLog(t *testing.T) {
	log := "Starting\n{\"not\": \"ours\"}\n" +
		`{"device": "cuda", "start": 100.5, "end": 105.25, "matmul_rel_err": 1e-6, "lm_rel_err": 2e-6, "ok": true}` + "\nbye\n"
	r, err := ParseLog(log)
	if err != nil {
		t.Fatal(err)
	}
	if r.Device != "cuda" || r.Start != 100.5 || !r.OK {
		t.Fatalf("%+v", r)
	}
	if got := r.StartTime(); got.Unix() != 100 || got.Nanosecond() != 5e8 {
		t.Errorf("StartTime = %v", got)
	}
	if err := r.Check(); err != nil {
		t.Errorf("Check: %v", err)
	}
	r.MatmulRelErr = 2e-3
	r.OK = false
	if err := r.Check(); err == nil || !strings.Contains(err.Error(), "matmul relative error") {
		t.Errorf("Check of a failed result: %v", err)
	}
	if _, err := ParseLog("no json here\n"); err == nil {
		t.Error("ParseLog of a log without the line succeeded")
	}
}

func TestCommand(t *testing.T) {
	got := strings.Join(Command(90*time.Second), " ")
	if got != "python3 /opt/gpupolicy-test-job/gpu_test_job.py --hold 90" {
		t.Errorf("Command = %q", got)
	}
}

// TestScriptCrash: --crash-after makes the job print its JSON line, then
// crash with an uncaught exception (exit CrashExitCode) after that long,
// without holding for --hold.
func TestScriptCrash(t *testing.T) {
	needTorch(t)
	cmd := exec.Command(systemPython, "gpu_test_job.py", "--cpu", "--matmul-n", "256", "--hold", "60", "--crash-after", "1.5")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	done := float64(time.Now().UnixNano()) / 1e9
	var ee *exec.ExitError
	if !asExit(err, &ee) || ee.ExitCode() != CrashExitCode {
		t.Fatalf("--crash-after 1.5: %v, want exit %d; stderr %s", err, CrashExitCode, stderr.String())
	}
	if !strings.Contains(stderr.String(), "Traceback") || !strings.Contains(stderr.String(), "as --crash-after asks") {
		t.Errorf("stderr lacks the crash's traceback: %s", stderr.String())
	}
	r, err := ParseLog(stdout.String())
	if err != nil {
		t.Fatal(err)
	}
	if r.CrashAfterS == nil || *r.CrashAfterS != 1.5 {
		t.Errorf("crash_after_s = %v, want 1.5", r.CrashAfterS)
	}
	if err := r.Check(); err != nil {
		t.Errorf("the crashing job's own checks: %v", err)
	}
	if d := done - r.End; d < 1.5 || d > 30 {
		t.Errorf("exited %.2f s after its end stamp, want 1.5 s (the crash), not the 60 s hold", d)
	}
}

// TestScriptAllocateCPU: on the CPU path --allocate-mib allocates nothing
// and says so; the job otherwise passes.
func TestScriptAllocateCPU(t *testing.T) {
	needTorch(t)
	out, err := exec.Command(systemPython, "gpu_test_job.py", "--cpu", "--matmul-n", "256", "--hold", "0", "--allocate-mib", "2048").Output()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	r, err := ParseLog(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if r.AllocatedExtraMiB != 0 || !strings.Contains(r.AllocNote, "no CUDA device: --allocate-mib 2048 not allocated") {
		t.Errorf("allocated %v MiB, note %q; want none, said so", r.AllocatedExtraMiB, r.AllocNote)
	}
	if err := r.Check(); err != nil {
		t.Errorf("check: %v", err)
	}
}

func TestFaultArgs(t *testing.T) {
	got := strings.Join(Command(5*time.Second, append(CrashArgs(2500*time.Millisecond), AllocateArgs(2048)...)...), " ")
	if got != "python3 /opt/gpupolicy-test-job/gpu_test_job.py --hold 5 --crash-after 2.5 --allocate-mib 2048" {
		t.Errorf("Command = %q", got)
	}
	if _, err := os.Stat(systemPython); err != nil {
		t.Skip(err)
	}
	// Refused before torch is imported: exit 2.
	for _, bad := range [][]string{{"--crash-after", "soon"}, {"--crash-after", "-1"}, {"--allocate-mib", "-5"}} {
		err := exec.Command(systemPython, append([]string{"gpu_test_job.py", "--hold", "0"}, bad...)...).Run()
		var ee *exec.ExitError
		if !asExit(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("%v: %v, want exit 2", bad, err)
		}
	}
}
