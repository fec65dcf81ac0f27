// Command mutate checks that gpupolicy answers every bad policy well. It
// writes thousands of mutated copies of a policy (default policies/lab) into
// a temporary directory, runs the built gpupolicy vet, render and explain on
// each, and counts what must never happen:
//
//   - a panic, a hang, or an exit status outside 0, 1 and 2;
//   - an exit-2 message without a position file:line:col in the mutant's
//     own files (a schema position is not one: the user does not have it);
//   - a policy that vet passes but render (or explain) rejects;
//   - vet output that differs between two runs of the same mutant.
//
// Mutations: delete lines and fields, duplicate lines, swap values, change
// numbers (0, negative, huge), change quantities, insert unknown fields,
// typos in field names, change strings (control characters, long names,
// name collisions), package names, CR and CRLF line endings, extra files,
// special files (a FIFO named *.cue). The run is deterministic for a seed.
//
//	go run ./hack/mutate -n 3000
//	go run ./hack/mutate -n 500 -seed 7 -show 3 -keep
//
// Exit 1 when anything was counted.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"
)

func main() {
	n := flag.Int("n", 3000, "number of mutants")
	seed := flag.Uint64("seed", 1, "random seed; the same seed gives the same mutants")
	policyDir := flag.String("policy", "policies/lab", "policy directory to mutate")
	bin := flag.String("bin", "", "gpupolicy binary to run (default: build ./cmd/gpupolicy once into the temp dir)")
	jobs := flag.Int("j", runtime.NumCPU(), "mutants run at once")
	timeout := flag.Duration("timeout", 30*time.Second, "per command; a command that runs longer is a hang")
	show := flag.Int("show", 2, "examples printed per class of failure")
	keep := flag.Bool("keep", false, "keep the temp dir (and the failing mutants in it)")
	logFile := flag.String("log", "", "write every problem found to this file")
	msgFile := flag.String("messages", "", "write every vet message (stderr) to this file, for reading")
	flag.Parse()

	base, err := readPolicy(*policyDir)
	if err != nil {
		fatal(err)
	}
	tmp, err := os.MkdirTemp("", "gpupolicy-mutate-")
	if err != nil {
		fatal(err)
	}
	if !*keep {
		defer os.RemoveAll(tmp)
	}
	if *bin == "" {
		*bin = filepath.Join(tmp, "gpupolicy")
		build := exec.Command("go", "build", "-o", *bin, "./cmd/gpupolicy")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fatal(fmt.Errorf("building gpupolicy: %w", err))
		}
	} else if abs, err := filepath.Abs(*bin); err == nil {
		*bin = abs
	}

	m := newMutator(base)
	mutants := make([]*mutant, *n)
	for i := range mutants {
		r := rand.New(rand.NewPCG(*seed, uint64(i)))
		mutants[i] = m.mutate(r)
		mutants[i].name = fmt.Sprintf("m%05d", i)
	}

	results := make([]result, *n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range max(*jobs, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				results[i] = check(tmp, *bin, mutants[i], *timeout, *keep)
			}
		}()
	}
	start := time.Now()
	for i := range mutants {
		next <- i
		if (i+1)%500 == 0 {
			fmt.Fprintf(os.Stderr, "mutate: %d/%d (%s)\n", i+1, *n, time.Since(start).Round(time.Second))
		}
	}
	close(next)
	wg.Wait()

	report(results, mutants, *show)
	if *msgFile != "" {
		var b strings.Builder
		for i, r := range results {
			fmt.Fprintf(&b, "## %s [%s] exit %d\n%s", mutants[i].name, strings.Join(mutants[i].ops, "; "), r.vetExit, r.vetStderr)
		}
		if err := os.WriteFile(*msgFile, []byte(b.String()), 0o644); err != nil {
			fatal(err)
		}
	}
	if *logFile != "" {
		if err := writeLog(*logFile, results, mutants); err != nil {
			fatal(err)
		}
	}
	if *keep {
		fmt.Printf("kept %s\n", tmp)
	}
	for _, r := range results {
		if len(r.problems) > 0 {
			os.Exit(1)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutate:", err)
	os.Exit(2)
}

// readPolicy reads the .cue files of dir.
func readPolicy(dir string) (map[string][]byte, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".cue") {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				return nil, err
			}
			out[e.Name()] = b
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no .cue files in %s", dir)
	}
	return out, nil
}

// A mutant is a policy directory: its files, FIFOs and subdirectories named
// *.cue, and what was done to it.
type mutant struct {
	name  string
	files map[string][]byte
	fifos []string
	dirs  []string
	ops   []string
}

// The classes of failure.
const (
	classPanic        = "panic"
	classExit         = "exit status outside 0/1/2 (or a hang)"
	classNoPos        = "exit 2 without a position in the user's files"
	classRender       = "vet passes, render fails"
	classExplain      = "vet passes, explain exits 2"
	classNondet       = "vet output differs between runs"
	classRenderNondet = "render output differs between runs"
)

var classes = []string{classPanic, classExit, classNoPos, classRender, classExplain, classNondet, classRenderNondet}

type problem struct {
	class, detail string
}

type result struct {
	vetExit   int
	vetStderr string
	problems  []problem
}

type run struct {
	exit   int
	stdout string
	stderr string
}

func exec1(ctx context.Context, dir, bin string, args ...string) run {
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := run{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
	case ctx.Err() != nil:
		r.exit = -1
		r.stderr += "\n(killed: timeout)"
	case errors.As(err, &ee):
		r.exit = ee.ExitCode()
	default:
		r.exit = -2
		r.stderr += "\n" + err.Error()
	}
	return r
}

// check writes the mutant under tmp, runs vet (twice), render and explain,
// and returns what went wrong.
func check(tmp, bin string, m *mutant, timeout time.Duration, keep bool) result {
	dir := filepath.Join(tmp, m.name)
	if err := m.write(dir); err != nil {
		return result{problems: []problem{{classExit, "writing mutant: " + err.Error()}}}
	}
	out := filepath.Join(tmp, m.name+".out")
	var res result
	add := func(class, detail string) { res.problems = append(res.problems, problem{class, detail}) }
	posRE := regexp.MustCompile(`^` + regexp.QuoteMeta(m.name) + `/[^/:]+\.cue:[0-9]+:[0-9]+: `)
	summaryRE := regexp.MustCompile(`^[0-9]+ problem\(s\) in the policy$`)

	ctx, cancel := context.WithTimeout(context.Background(), 4*timeout)
	defer cancel()
	cmd := func(args ...string) run {
		c, cl := context.WithTimeout(ctx, timeout)
		defer cl()
		return exec1(c, tmp, bin, args...)
	}
	judge := func(verb string, r run, okExits ...int) {
		if strings.Contains(r.stderr, "panic:") || strings.Contains(r.stderr, "goroutine ") {
			add(classPanic, verb+": "+firstLines(r.stderr, 6))
			return
		}
		ok := false
		for _, e := range okExits {
			ok = ok || r.exit == e
		}
		if !ok {
			add(classExit, fmt.Sprintf("%s exited %d: %s", verb, r.exit, firstLines(r.stderr, 4)))
			return
		}
		if r.exit != 2 {
			return
		}
		for _, line := range strings.Split(strings.TrimRight(r.stderr, "\n"), "\n") {
			if summaryRE.MatchString(line) {
				continue
			}
			if !posRE.MatchString(line) {
				add(classNoPos, verb+": "+truncate(line, 300))
				return
			}
		}
	}

	vet := cmd("vet", m.name)
	res.vetExit, res.vetStderr = vet.exit, vet.stderr
	judge("vet", vet, 0, 2)
	vet2 := cmd("vet", m.name)
	if vet2.stdout != vet.stdout || vet2.stderr != vet.stderr || vet2.exit != vet.exit {
		add(classNondet, fmt.Sprintf("first:\n%s\nsecond:\n%s", firstLines(vet.stderr, 6), firstLines(vet2.stderr, 6)))
	}
	rnd := cmd("render", m.name, "--out", out)
	judge("render", rnd, 0, 2)
	if vet.exit == 0 && rnd.exit != 0 {
		add(classRender, fmt.Sprintf("render exited %d: %s", rnd.exit, firstLines(rnd.stderr, 6)))
	}
	if vet.exit == 0 && rnd.exit == 0 {
		first, err := readTree(out)
		rnd2 := cmd("render", m.name, "--out", out)
		second, err2 := readTree(out)
		if err != nil || err2 != nil || rnd2.exit != 0 || first != second {
			add(classRenderNondet, fmt.Sprintf("second render exited %d (%v %v)", rnd2.exit, err, err2))
		}
	}
	exp := cmd("explain", m.name)
	judge("explain", exp, 0, 1, 2)
	if vet.exit == 0 && exp.exit == 2 {
		add(classExplain, firstLines(exp.stderr, 6))
	}
	if !keep || len(res.problems) == 0 {
		os.RemoveAll(dir)
	}
	os.RemoveAll(out)
	return res
}

func readTree(dir string) (string, error) {
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		fmt.Fprintf(&b, "== %s\n%s", strings.TrimPrefix(p, dir), data)
		return err
	})
	return b.String(), err
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "…")
	}
	for i := range lines {
		lines[i] = truncate(lines[i], 300)
	}
	return strings.Join(lines, "\n    ")
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func report(results []result, mutants []*mutant, show int) {
	exits := map[int]int{}
	counts := map[string]int{}
	examples := map[string][]string{}
	for i, r := range results {
		exits[r.vetExit]++
		seen := map[string]bool{}
		for _, p := range r.problems {
			if seen[p.class] {
				continue
			}
			seen[p.class] = true
			counts[p.class]++
			if len(examples[p.class]) < show {
				examples[p.class] = append(examples[p.class], fmt.Sprintf("  %s [%s]\n    %s",
					mutants[i].name, strings.Join(mutants[i].ops, "; "), p.detail))
			}
		}
	}
	var codes []int
	for c := range exits {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	fmt.Printf("mutants: %d\n", len(results))
	for _, c := range codes {
		fmt.Printf("  vet exit %d: %d\n", c, exits[c])
	}
	for _, c := range classes {
		fmt.Printf("%-48s %d\n", c+":", counts[c])
	}
	for _, c := range classes {
		if len(examples[c]) > 0 {
			fmt.Printf("\n%s, e.g.:\n%s\n", c, strings.Join(examples[c], "\n"))
		}
	}
}

// writeLog writes every problem, one block per mutant.
func writeLog(path string, results []result, mutants []*mutant) error {
	var b strings.Builder
	for i, r := range results {
		for _, p := range r.problems {
			fmt.Fprintf(&b, "%s [%s] %s\n    %s\n", mutants[i].name, strings.Join(mutants[i].ops, "; "), p.class, p.detail)
		}
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
