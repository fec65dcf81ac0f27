package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

var errBadPEM = errors.New("cluster: bad PEM data")

// process is one component of the lab cluster, started in its own process
// group so that it and anything it forks can be signalled together.
type process struct {
	name    string
	pid     int
	logPath string
	done    chan struct{} // closed once the child has been reaped; nil if not our child
	waitErr error
}

func startProcess(runDir, name, bin string, args, env []string, detach bool) (*process, error) {
	logPath := filepath.Join(runDir, "logs", name+".log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "# %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Dir = runDir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !detach {
		// Die with the test binary even if it is killed without running Stop.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	if err := writePID(runDir, name, p.pid); err != nil {
		return p, err
	}
	return p, nil
}

func pidPath(runDir, name string) string { return filepath.Join(runDir, "pids", name+".pid") }

func writePID(runDir, name string, pid int) error {
	path := pidPath(runDir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// readPIDs returns the pid of every component that has a pid file in runDir
// and whose process still mentions runDir on its command line (so a pid that
// has since been reused by an unrelated process is never signalled).
func readPIDs(runDir string) map[string]int {
	out := map[string]int{}
	entries, _ := os.ReadDir(filepath.Join(runDir, "pids"))
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(runDir, "pids", e.Name()))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 1 && cmdlineMentions(pid, runDir) {
			out[name] = pid
		}
	}
	return out
}

func cmdlineMentions(pid int, s string) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return err == nil && bytes.Contains(data, []byte(s))
}

// exited reports whether the process has already exited, with its status.
func (p *process) exited() (bool, error) {
	if p.done != nil {
		select {
		case <-p.done:
			return true, p.waitErr
		default:
			return false, nil
		}
	}
	return len(groupMembers(p.pid)) == 0 && !alive(p.pid), nil
}

// tail returns the last n lines of the process's log.
func (p *process) tail(n int) string { return tailFile(p.logPath, n) }

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// alive reports whether pid names a live (not zombie) process.
func alive(pid int) bool {
	if pid <= 1 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	state, _, ok := procStat(pid)
	if !ok {
		return false
	}
	return state != "Z" && state != "X"
}

// procStat returns the state and process group of pid from /proc.
func procStat(pid int) (state string, pgrp int, ok bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may contain spaces and parens.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 {
		return "", 0, false
	}
	pgrp, err = strconv.Atoi(f[2])
	if err != nil {
		return "", 0, false
	}
	return f[0], pgrp, true
}

// groupMembers returns the live processes in process group pgid.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		state, pgrp, ok := procStat(pid)
		if ok && pgrp == pgid && state != "Z" && state != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// stopGroup sends SIGTERM to the process group led by pid, waits up to grace
// for it to exit, then sends SIGKILL. It returns an error if anything in the
// group is still alive afterwards.
func stopGroup(pid int, done <-chan struct{}, grace time.Duration) error {
	gone := func() bool {
		if done != nil {
			select {
			case <-done:
			default:
				return false
			}
		} else if alive(pid) {
			return false
		}
		return len(groupMembers(pid)) == 0
	}
	if gone() {
		return nil
	}
	signalGroup(pid, syscall.SIGTERM)
	if waitFor(gone, grace) {
		return nil
	}
	signalGroup(pid, syscall.SIGKILL)
	if waitFor(gone, 10*time.Second) {
		return nil
	}
	return fmt.Errorf("process group %d still has live processes %v after SIGKILL", pid, groupMembers(pid))
}

func signalGroup(pid int, sig syscall.Signal) {
	if err := syscall.Kill(-pid, sig); err != nil {
		_ = syscall.Kill(pid, sig)
	}
}

func waitFor(cond func() bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
