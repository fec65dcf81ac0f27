package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// mutator makes mutants of one base policy.
type mutator struct {
	base  map[string][]byte
	names []string // sorted file names of the base
	// pool holds the names the policy uses (cards, queues, locks, templates,
	// namespaces, ...) and the names render gives objects, for collisions.
	pool []string
}

var (
	fieldRE  = regexp.MustCompile(`^(\s*)("[^"]*"|[A-Za-z_][A-Za-z0-9_-]*)([!?]?)(\s*:\s*)(.*)$`)
	numberRE = regexp.MustCompile(`-?\b[0-9]+\b`)
	stringRE = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"`)
	quantRE  = regexp.MustCompile(`"[0-9]+(Mi|Gi)"|"0"`)
	nameRE   = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

func newMutator(base map[string][]byte) *mutator {
	m := &mutator{base: base}
	set := map[string]bool{
		// Names render gives objects beside the policy's own.
		"gpu-semaphore": true, "nvidia-device-plugin": true, "nvidia-device-plugin-config": true,
		"gpupolicy-test-job": true, "gpu-memory-default": true,
	}
	for n, b := range base {
		m.names = append(m.names, n)
		for _, s := range stringRE.FindAllString(string(b), -1) {
			if s = strings.Trim(s, `"`); nameRE.MatchString(s) {
				set[s] = true
			}
		}
	}
	sort.Strings(m.names)
	for s := range set {
		m.pool = append(m.pool, s)
	}
	sort.Strings(m.pool)
	return m
}

// op is one mutation; it returns a description, or "" when it did not apply.
type op struct {
	name   string
	weight int
	fn     func(m *mutator, r *rand.Rand, mu *mutant) string
}

var ops = []op{
	{"delete-line", 6, deleteLine},
	{"delete-field", 8, deleteField},
	{"duplicate-line", 4, duplicateLine},
	{"swap-values", 6, swapValues},
	{"number", 10, changeNumber},
	{"quantity", 6, changeQuantity},
	{"unknown-field", 6, unknownField},
	{"typo", 8, typoField},
	{"string", 10, changeString},
	{"collide", 6, collideName},
	{"package", 3, changePackage},
	{"line-endings", 3, lineEndings},
	{"add-file", 8, addFile},
	{"remove-file", 1, removeFile},
	{"garbage", 2, garbage},
	{"special-file", 1, specialFile},
}

func (m *mutator) mutate(r *rand.Rand) *mutant {
	mu := &mutant{files: map[string][]byte{}}
	for n, b := range m.base {
		mu.files[n] = append([]byte(nil), b...)
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	k := 1 + r.IntN(3)
	for tries := 0; len(mu.ops) < k && tries < 50; tries++ {
		x := r.IntN(total)
		for _, o := range ops {
			if x -= o.weight; x < 0 {
				if d := o.fn(m, r, mu); d != "" {
					mu.ops = append(mu.ops, o.name+": "+d)
				}
				break
			}
		}
	}
	return mu
}

func (mu *mutant) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for n, b := range mu.files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return err
		}
	}
	for _, n := range mu.dirs {
		if err := os.MkdirAll(filepath.Join(dir, n), 0o755); err != nil {
			return err
		}
	}
	for _, n := range mu.fifos {
		if err := mkfifo(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// fileNames returns the mutant's files, sorted (map order is random).
func (mu *mutant) fileNames() []string {
	var out []string
	for n := range mu.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// lines of a random file; set writes them back.
func (mu *mutant) randomFile(r *rand.Rand) (string, []string) {
	names := mu.fileNames()
	if len(names) == 0 {
		return "", nil
	}
	n := pick(r, names)
	return n, strings.Split(string(mu.files[n]), "\n")
}

func (mu *mutant) set(name string, lines []string) {
	mu.files[name] = []byte(strings.Join(lines, "\n"))
}

// matching returns the indexes of lines matching re.
func matching(lines []string, re *regexp.Regexp) []int {
	var out []int
	for i, l := range lines {
		if re.MatchString(l) {
			out = append(out, i)
		}
	}
	return out
}

// randomField picks a random file and a random field line in it (-1 for
// none).
func (mu *mutant) randomField(r *rand.Rand) (string, []string, int) {
	n, lines := mu.randomFile(r)
	idx := matching(lines, fieldRE)
	if len(idx) == 0 {
		return n, lines, -1
	}
	return n, lines, pick(r, idx)
}

func deleteLine(m *mutator, r *rand.Rand, mu *mutant) string {
	return mu.editLine(r, func(lines []string, i int) []string { return append(lines[:i:i], lines[i+1:]...) })
}

func duplicateLine(m *mutator, r *rand.Rand, mu *mutant) string {
	return mu.editLine(r, func(lines []string, i int) []string { return append(lines[:i+1:i+1], lines[i:]...) })
}

// editLine applies edit to a random line of a random file.
func (mu *mutant) editLine(r *rand.Rand, edit func(lines []string, i int) []string) string {
	n, lines := mu.randomFile(r)
	if len(lines) == 0 {
		return ""
	}
	i := r.IntN(len(lines))
	d := fmt.Sprintf("%s:%d %q", n, i+1, lines[i])
	mu.set(n, edit(lines, i))
	return d
}

func deleteField(m *mutator, r *rand.Rand, mu *mutant) string {
	n, lines, i := mu.randomField(r)
	if i < 0 {
		return ""
	}
	d := fmt.Sprintf("%s:%d %q", n, i+1, lines[i])
	// A field that opens a struct: delete through its closing line.
	end := i
	if strings.HasSuffix(strings.TrimSpace(lines[i]), "{") {
		depth := 0
		for j := i; j < len(lines); j++ {
			depth += strings.Count(lines[j], "{") - strings.Count(lines[j], "}")
			if depth <= 0 {
				end = j
				break
			}
		}
	}
	mu.set(n, append(lines[:i:i], lines[end+1:]...))
	return d
}

func swapValues(m *mutator, r *rand.Rand, mu *mutant) string {
	n, lines := mu.randomFile(r)
	var idx []int
	for _, i := range matching(lines, fieldRE) {
		if v := fieldRE.FindStringSubmatch(lines[i])[5]; v != "" && !strings.HasSuffix(v, "{") {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return ""
	}
	a, b := pick(r, idx), pick(r, idx)
	if a == b {
		return ""
	}
	ma, mb := fieldRE.FindStringSubmatch(lines[a]), fieldRE.FindStringSubmatch(lines[b])
	lines[a] = ma[1] + ma[2] + ma[3] + ma[4] + mb[5]
	lines[b] = mb[1] + mb[2] + mb[3] + mb[4] + ma[5]
	mu.set(n, lines)
	return fmt.Sprintf("%s:%d and :%d", n, a+1, b+1)
}

var numbers = []string{"0", "-1", "-7", "1", "2", "3", "63", "64", "65", "4096", "100001",
	"1000000001", "2147483648", "9999999999", "1073741825", "9223372036854775807",
	"99999999999999999999", "1.5", "1e3", "0x10"}

func changeNumber(m *mutator, r *rand.Rand, mu *mutant) string {
	return mu.replaceMatch(r, numberRE, func(l string) bool {
		return !strings.HasPrefix(strings.TrimSpace(l), "//") && !stringRE.MatchString(l)
	}, nil, func() string { return pick(r, numbers) })
}

var quantities = []string{`"0"`, `"0Gi"`, `"0Mi"`, `"1Mi"`, `"1GB"`, `"1.5Gi"`, `"-1Gi"`, `"1Ti"`,
	`"9999999999Gi"`, `"9999999999Mi"`, `"8796093022208Mi"`, `"8388608Gi"`, `"8388607Gi"`,
	`"1048576Gi"`, `"1048577Gi"`, `"1073741824Mi"`, `"1073741825Mi"`, `"12200Mi"`, `"1024"`, `""`,
	`9999999999`, `1073741825`, `"4Gi"`}

func changeQuantity(m *mutator, r *rand.Rand, mu *mutant) string {
	n, lines := mu.randomFile(r)
	var idx []int
	for i, l := range lines {
		if strings.Contains(l, "emory") || quantRE.MatchString(l) {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return ""
	}
	i := pick(r, idx)
	v := pick(r, quantities)
	l := lines[i]
	if loc := quantRE.FindStringIndex(l); loc != nil {
		l = l[:loc[0]] + v + l[loc[1]:]
	} else if loc := numberRE.FindStringIndex(l); loc != nil && !strings.HasPrefix(strings.TrimSpace(l), "//") {
		l = l[:loc[0]] + v + l[loc[1]:]
	} else {
		return ""
	}
	lines[i] = l
	mu.set(n, lines)
	return fmt.Sprintf("%s:%d → %s", n, i+1, v)
}

var unknownFields = []string{`mdoe: "always-on"`, `bogus: 1`, `nominalQuta: 8`, `Shares: 1`,
	`"x-y": "z"`, `descripton: "typo"`, `cohrot: "gpu"`, `lock: ["main"]`, `prioirty: "batch"`}

func unknownField(m *mutator, r *rand.Rand, mu *mutant) string {
	n, lines := mu.randomFile(r)
	var idx []int
	for i, l := range lines {
		if strings.HasSuffix(strings.TrimSpace(l), "{") {
			idx = append(idx, i)
		}
	}
	f := pick(r, unknownFields)
	if len(idx) == 0 || r.IntN(4) == 0 {
		// At the top level.
		lines = append(lines, f)
		mu.set(n, lines)
		return fmt.Sprintf("%s: top level %s", n, f)
	}
	i := pick(r, idx)
	indent := lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))] + "\t"
	out := append(lines[:i+1:i+1], indent+f)
	out = append(out, lines[i+1:]...)
	mu.set(n, out)
	return fmt.Sprintf("%s:%d %s", n, i+2, f)
}

func typoField(m *mutator, r *rand.Rand, mu *mutant) string {
	n, lines, i := mu.randomField(r)
	if i < 0 {
		return ""
	}
	g := fieldRE.FindStringSubmatch(lines[i])
	key := g[2]
	quoted := strings.HasPrefix(key, `"`)
	k := []rune(strings.Trim(key, `"`))
	if len(k) < 2 {
		return ""
	}
	j := r.IntN(len(k) - 1)
	switch r.IntN(4) {
	case 0: // drop
		k = append(k[:j:j], k[j+1:]...)
	case 1: // swap
		k[j], k[j+1] = k[j+1], k[j]
	case 2: // double
		k = append(k[:j+1:j+1], k[j:]...)
	default: // case
		k[j] = []rune(strings.ToUpper(string(k[j])))[0]
	}
	nk := string(k)
	if quoted || !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`).MatchString(nk) {
		nk = `"` + nk + `"`
	}
	lines[i] = g[1] + nk + g[3] + g[4] + g[5]
	mu.set(n, lines)
	return fmt.Sprintf("%s:%d %s → %s", n, i+1, key, nk)
}

var longName = strings.Repeat("a", 64)

func strings_(m *mutator, r *rand.Rand) string {
	switch r.IntN(14) {
	case 0:
		return `""`
	case 1:
		return `"a\u0007b"`
	case 2:
		return `"line one\nline two"`
	case 3:
		return `"tab\there"`
	case 4:
		return `"` + longName + `"`
	case 5:
		return `"` + strings.Repeat("x", 300) + `"`
	case 6:
		return `"Main"`
	case 7:
		return `"a b"`
	case 8:
		return `"-x"`
	case 9:
		return `"straße"`
	case 10:
		return `"\u0000"`
	case 11:
		return `"esc\u001b[31mred"`
	case 12:
		return `"` + pick(r, m.pool) + `-x"`
	default:
		return `"` + pick(r, m.pool) + `"`
	}
}

func changeString(m *mutator, r *rand.Rand, mu *mutant) string {
	return mu.replaceMatch(r, stringRE, func(l string) bool {
		return !strings.HasPrefix(strings.TrimSpace(l), "import")
	}, nil, func() string { return strings_(m, r) })
}

// replaceMatch replaces one match of re that isMatch accepts (any, when
// nil), on a random line of a random file that isLine accepts, with
// value(). The random draws come in one order: file, line, match, value.
func (mu *mutant) replaceMatch(r *rand.Rand, re *regexp.Regexp, isLine, isMatch func(string) bool, value func() string) string {
	n, lines := mu.randomFile(r)
	matches := func(l string) [][]int {
		var out [][]int
		for _, loc := range re.FindAllStringIndex(l, -1) {
			if isMatch == nil || isMatch(l[loc[0]:loc[1]]) {
				out = append(out, loc)
			}
		}
		return out
	}
	var idx []int
	for i, l := range lines {
		if isLine(l) && len(matches(l)) > 0 {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return ""
	}
	i := pick(r, idx)
	loc := pick(r, matches(lines[i]))
	v := value()
	lines[i] = lines[i][:loc[0]] + v + lines[i][loc[1]:]
	mu.set(n, lines)
	return fmt.Sprintf("%s:%d → %s", n, i+1, truncate(v, 40))
}

// collideName replaces a name string with another name the policy uses.
func collideName(m *mutator, r *rand.Rand, mu *mutant) string {
	return mu.replaceMatch(r, stringRE, func(string) bool { return true },
		func(s string) bool { return nameRE.MatchString(strings.Trim(s, `"`)) },
		func() string { return `"` + pick(r, m.pool) + `"` })
}

func changePackage(m *mutator, r *rand.Rand, mu *mutant) string {
	n, lines := mu.randomFile(r)
	for i, l := range lines {
		if strings.HasPrefix(l, "package ") {
			v := pick(r, []string{"package lab2", "package main", "package schema", "", "package _", "package Lab"})
			lines[i] = v
			mu.set(n, lines)
			return fmt.Sprintf("%s:%d → %q", n, i+1, v)
		}
	}
	return ""
}

func lineEndings(m *mutator, r *rand.Rand, mu *mutant) string {
	names := mu.fileNames()
	if len(names) == 0 {
		return ""
	}
	n := pick(r, names)
	s := strings.ReplaceAll(string(mu.files[n]), "\r\n", "\n")
	switch r.IntN(3) {
	case 0:
		mu.files[n] = []byte(strings.ReplaceAll(s, "\n", "\r"))
		return n + " CR"
	case 1:
		mu.files[n] = []byte(strings.ReplaceAll(s, "\n", "\r\n"))
		return n + " CRLF"
	default:
		mu.files[n] = []byte("\ufeff" + s)
		return n + " BOM"
	}
}

// snippets are extra files in the policy's package.
var snippets = []string{
	// Object name clashes in the render.
	`templates: "gpu-step-no-cache": {namespace: "experiments", queue: "gpu-general", card: "rtx-5060-ti", locks: ["main"], image: "x", command: [], hostMemory: "1Gi", gpuMemory: 512}`,
	`templates: other: {namespace: "experiments", queue: "gpu-general", card: "rtx-5060-ti", locks: [], image: "x", command: [], hostMemory: "1Gi", gpuMemory: 512, cacheFree: {name: "gpu-step", locks: []}}`,
	`templates: other: {namespace: "experiments", queue: "gpu-general", card: "rtx-5060-ti", locks: [], image: "x", command: [], hostMemory: "1Gi", gpuMemory: 512, cacheFree: {name: "other", locks: []}}`,
	`devicePlugin: {namespace: "experiments", configMap: "gpu-semaphore"}`,
	`devicePlugin: {namespace: "experiments", configMap: "gpupolicy-test-job"}`,
	`argo: semaphoreConfigMap: "gpupolicy-test-job"`,
	`devicePlugin: namespace: "experiments"` + "\n" + `argo: semaphoreConfigMap: "nvidia-device-plugin-config"`,
	`queues: "gpu-extra": {namespaces: ["experiments"], localQueue: "gpu-general", flavors: "rtx-5060-ti": {shares: nominalQuota: 0, hostMemory: nominalQuota: "0", gpuMemory: nominalQuota: 0}, preemption: {}}`,
	`queues: "gpu-general": localQueue: "x"` + "\n" + `queues: "gpu-large-model": {localQueue: "x", namespaces: ["llm", "models"]}`,
	`queues: "gpu-general": namespaces: ["experiments", "models", "experiments"]`,
	// Control characters and long text where render copies it.
	`services: whisper: {mode: "always-on", description: "tab\there\u0000", gpuMemory: 100}`,
	`priorities: low: {value: 1, description: "line\nbreak"}`,
	`locks: extra: {size: 1, takenBefore: [], description: "bell\u0007"}`,
	`cards: "rtx-5060-ti": model: "RTX\u0085"`,
	`templates: "gpu-step": command: ["python3\u0000", "x"]`,
	`templates: "gpu-step": image: "registry.lab.internal/gpu-job:2026.11\n"`,
	`services: whisper: {mode: "always-on", description: "` + strings.Repeat("long ", 60000) + `", gpuMemory: 100}`,
	// Quantities at and over the bounds.
	`queues: "gpu-general": flavors: "rtx-5060-ti": hostMemory: borrowingLimit: "9999999999Gi"`,
	`queues: "gpu-general": flavors: "rtx-5060-ti": shares: lendingLimit: 1000000`,
	`services: whisper: {mode: "always-on", hostMemory: "8589934591Gi", gpuMemory: 100}`,
	`cards: "rtx-5060-ti": nodeLabels: "bad label": "x"`,
	`cards: "rtx-5060-ti": nodeLabels: "a/b/c": "` + strings.Repeat("v", 70) + `"`,
	`cards: other: {model: "x", memoryMiB: 1, shares: 1, nodeLabels: {}}`,
	`declarationResource: "nvidia.com/gpu"`,
	`declarationResource: "memory/x"`,
	`declarationResource: "a/` + strings.Repeat("b", 70) + `"`,
	`templates: "gpu-step": modelCache: mountPath: "/a:b"`,
	`templates: "gpu-step": modelCache: mountPath: "/"`,
	`templates: "gpu-step": timeLimitSeconds: 31536000`,
	`services: whisper: {mode: "on-demand", idleScaleDownSeconds: 60, namespace: "llm", queue: "gpu-large-model", priority: "on-demand-llm", hostMemory: "1Gi", gpuMemory: 100}`,
	`priorities: x: {value: 1000000000, description: "x"}`,
	`priorities: x: {value: -1000000000, description: "x"}`,
	`locks: main: takenBefore: ["cache"]`,
	`name: "` + longName + `"`,
	`name: "` + strings.Repeat("n", 63) + `"`,
	// Open structs and odd CUE.
	`services: [string]: description: "all"`,
	`_hidden: 1`,
	`#Def: {a: 1}`,
	`let x = 1`,
	`services: embed: _|_`,
	`queues: "gpu-general": flavors: "rtx-5060-ti": shares: nominalQuota: int`,
	`templates: "gpu-step": priority: "training" | "batch"`,
	`import "strings"` + "\n" + `name: strings.ToUpper("lab")`,
	`import "nope/nope"`,
	`name: "lab"` + "\n" + `name: "other"`,
}

func addFile(m *mutator, r *rand.Rand, mu *mutant) string {
	s := pick(r, snippets)
	pkg := "package lab\n\n"
	if r.IntN(10) == 0 {
		pkg = pick(r, []string{"package other\n\n", "", "package lab\npackage lab\n"})
	}
	body := pkg + s + "\n"
	name := fmt.Sprintf("zz_%d.cue", len(mu.files))
	mu.files[name] = []byte(body)
	return name + ": " + truncate(strings.SplitN(s, "\n", 2)[0], 60)
}

func removeFile(m *mutator, r *rand.Rand, mu *mutant) string {
	names := mu.fileNames()
	if len(names) < 2 {
		return ""
	}
	n := pick(r, names)
	delete(mu.files, n)
	return n
}

func garbage(m *mutator, r *rand.Rand, mu *mutant) string {
	names := mu.fileNames()
	if len(names) == 0 {
		return ""
	}
	n := pick(r, names)
	switch r.IntN(5) {
	case 0:
		mu.files[n] = nil
		return n + " empty"
	case 1:
		mu.files[n] = append(mu.files[n], 0xff, 0xfe, '\n')
		return n + " invalid UTF-8"
	case 2:
		b := mu.files[n]
		mu.files[n] = b[:r.IntN(len(b)+1)]
		return n + " truncated"
	case 3:
		mu.files[n] = append(mu.files[n], 0)
		return n + " NUL byte"
	default:
		mu.files[n] = []byte("// only a comment\n")
		return n + " comment only"
	}
}

func specialFile(m *mutator, r *rand.Rand, mu *mutant) string {
	if r.IntN(2) == 0 {
		mu.dirs = append(mu.dirs, "sub.cue")
		return "directory sub.cue"
	}
	mu.fifos = append(mu.fifos, "fifo.cue")
	return "FIFO fifo.cue"
}
