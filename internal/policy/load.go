package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing/fstest"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/schema"
)

// Load reads the CUE policy package in dir (its .cue files, not
// subdirectories), checks it against the embedded schema and the rules of
// this package, and returns the typed model.
//
// Errors: a finding.List (every schema or rule violation, with positions
// relative to the current directory, and the warnings of Warnings when
// the policy breaks a rule) for a bad policy; any other error for I/O
// problems. Both are input errors (exit 2).
func Load(dir string) (*Policy, error) {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return nil, fmt.Errorf("policy %s is a file: POLICY_DIR is the directory of a policy's .cue files (e.g. %s)", dir, filepath.Dir(dir))
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading policy %s: %w", dir, err)
	}
	display := displayRelative(dir)
	files := map[string][]byte{}
	var refused finding.List
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cue") {
			continue
		}
		// Stat, never open, what is not a regular file: opening a named
		// pipe blocks until someone writes to it, a device may never end.
		path := filepath.Join(dir, e.Name())
		fi, err := os.Stat(path)
		switch {
		case err != nil:
			refused = append(refused, fileFinding(display(e.Name()), "cannot be read: %v", err))
			continue
		case fi.IsDir():
			continue
		case !fi.Mode().IsRegular():
			refused = append(refused, fileFinding(display(e.Name()),
				"is not a regular file (%s): a policy file is plain CUE text; gpupolicy does not read it", fileKind(fi.Mode())))
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			refused = append(refused, fileFinding(display(e.Name()), "cannot be read: %v", err))
			continue
		}
		files[e.Name()] = b
	}
	if len(refused) > 0 {
		refused.SortByPos()
		return nil, refused
	}
	if len(files) == 0 {
		f := RulePolicyFiles.Newf("no .cue files in the policy directory %s", dir)
		return nil, finding.List{f}
	}
	return LoadFiles(files, func(name string) string { return display(name) })
}

// displayRelative returns a function mapping a file's base name to its path
// relative to the current directory (or absolute when that is shorter).
func displayRelative(dir string) func(string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = dir
	}
	rel := dir
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, abs); err == nil {
			rel = r
		}
	}
	return func(name string) string { return filepath.Join(rel, name) }
}

// LoadFiles evaluates a policy given as file base name → content, e.g. read
// from a git tree. display maps a base name to the name used in positions
// (e.g. "a1b2c3d:policies/lab/queues.cue").
func LoadFiles(files map[string][]byte, display func(name string) string) (*Policy, error) {
	return loadFiles(files, display, true)
}

// loadFiles is LoadFiles; fast false takes the checked path even for a
// policy evalChecked would answer (tests compare the two).
func loadFiles(files map[string][]byte, display func(name string) string, fast bool) (*Policy, error) {
	if len(files) == 0 {
		return nil, finding.List{RulePolicyFiles.New("no .cue files in the policy directory")}
	}
	files = normalizeLineEndings(files)
	fsys, fromFS, err := policyFS(files, display)
	if err != nil {
		return nil, err
	}
	fallback := fallbackPos(files, display)
	if fast {
		if v, raw, ok := evalChecked(fsys, fromFS, files); ok {
			reload := func() cue.Value {
				v, _, _ := evalChecked(fsys, fromFS, files)
				return v
			}
			return decodePolicy(v, raw, fallback, reload)
		}
	}
	// The checked path: every step's errors worded for the user.
	if ds := checkFiles(files, display); len(ds) > 0 {
		return nil, ds
	}
	cc := &cueContext{fallback: fallback}
	cfg := &load.Config{FS: fsys, Dir: "/", FromFSPath: fromFS}
	insts := load.Instances([]string{"./policy", "./schema"}, cfg)
	ctx := cuecontext.New()
	cc.raw = func() cue.Value { return rawPolicy(ctx, fsys, fromFS) }
	for _, inst := range insts {
		if inst.Err != nil {
			return nil, fromCUE(inst.Err, RuleSyntax, cc)
		}
	}
	// The schema first: a policy embeds #Policy, so its own build already
	// reports schema errors, and fromCUE words them from the schema.
	sv := ctx.BuildInstance(insts[1])
	if err := sv.Err(); err != nil {
		return nil, fmt.Errorf("the embedded schema does not build (a bug): %w", err)
	}
	def := sv.LookupPath(cue.ParsePath("#Policy"))
	cc.def = def
	pv := ctx.BuildInstance(insts[0])
	cc.user, cc.unified = pv, pv
	if err := pv.Err(); err != nil {
		return nil, fromCUE(err, RuleSchema, cc)
	}
	v := pv.Unify(def)
	cc.unified = v
	if err := v.Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, fromCUE(err, RuleSchema, cc)
	}
	raw, err := v.MarshalJSON()
	if err != nil {
		return nil, fromCUE(err, RuleSchema, cc)
	}
	return decodePolicy(v, raw, cc.fallback, nil)
}

// policyFS lays out the policy's files (base name → content) and the
// embedded schema as the CUE module the loader reads: policy/ and schema/
// under modulePath. fromFS names a file of it in positions: display's name
// for the policy's, schema/NAME for the schema's.
func policyFS(files map[string][]byte, display func(name string) string) (fsys fstest.MapFS, fromFS func(string) string, err error) {
	fsys = fstest.MapFS{
		"cue.mod/module.cue": {Data: []byte(schema.ModuleFile)},
	}
	schemaFiles, err := fs.Glob(schema.Files, "*.cue")
	if err != nil {
		return nil, nil, err
	}
	for _, name := range schemaFiles {
		b, err := schema.Files.ReadFile(name)
		if err != nil {
			return nil, nil, err
		}
		fsys["schema/"+name] = &fstest.MapFile{Data: b}
	}
	for name, b := range files {
		fsys["policy/"+name] = &fstest.MapFile{Data: b}
	}
	fromFS = func(p string) string {
		p = strings.TrimPrefix(p, "/")
		if strings.HasPrefix(p, "policy/") {
			return display(strings.TrimPrefix(p, "policy/"))
		}
		return p // schema/policy.cue: the embedded schema
	}
	return fsys, fromFS, nil
}

// modulePath is the CUE module the policy is loaded in (schema.ModuleFile,
// without its major version): the schema is modulePath/schema, the
// policy's package modulePath/policy.
const modulePath = "github.com/gpupolicy/gpupolicy"

// checkDir holds the package evalChecked adds next to the policy's: it
// imports the policy's package (%[1]s: its import path) and the schema
// (%[2]s) and is their unification. Its directory is under schema/, so a
// position in it is never taken for the user's.
const (
	checkDir  = "schema/gpupolicy-check"
	checkFile = `package check

import (
	policy %[1]q
	schema %[2]q
)

policy & schema.#Policy
`
)

// evalChecked is LoadFiles' fast path: the policy's package unified with
// #Policy, the value the checked path builds, in one evaluation instead of
// two, and its JSON. The checked path builds the package (which embeds
// #Policy) and then unifies it with #Policy, to close it over the fields
// the embedding file declares itself (CUE allows those next to an
// embedded definition); the unification evaluates every conjunct again.
// Here the unification is the whole of a package that imports the
// policy's, so the policy's package is never evaluated on its own.
//
// It answers ok only for a policy whose every file is in one package that
// loads, evaluates with #Policy without error and is concrete (checkFiles
// then finds nothing either); for anything else the checked path runs,
// from scratch, and words the errors.
func evalChecked(fsys fstest.MapFS, fromFS func(string) string, files map[string][]byte) (v cue.Value, raw []byte, ok bool) {
	names := sortedFileNames(files)
	if len(names) == 0 {
		return cue.Value{}, nil, false
	}
	f, err := parser.ParseFile(names[0], files[names[0]], parser.PackageClauseOnly)
	if err != nil || f.PackageName() == "" || f.PackageName() == "_" {
		return cue.Value{}, nil, false
	}
	policyPath := modulePath + "/policy:" + f.PackageName()
	fsys[checkDir+"/check.cue"] = &fstest.MapFile{Data: []byte(fmt.Sprintf(checkFile, policyPath, modulePath+"/schema"))}
	defer delete(fsys, checkDir+"/check.cue")
	insts := load.Instances([]string{"./" + checkDir}, &load.Config{FS: fsys, Dir: "/", FromFSPath: fromFS})
	if len(insts) != 1 || insts[0].Err != nil {
		return cue.Value{}, nil, false
	}
	loaded := false
	for _, imp := range insts[0].Imports {
		if imp.ImportPath == policyPath {
			loaded = imp.Err == nil && len(imp.Files) == len(files)
		}
	}
	if !loaded {
		return cue.Value{}, nil, false
	}
	v = cuecontext.New().BuildInstance(insts[0])
	if v.Err() != nil || v.Validate(cue.Concrete(true), cue.Final()) != nil {
		return cue.Value{}, nil, false
	}
	raw, err = v.MarshalJSON()
	if err != nil {
		return cue.Value{}, nil, false
	}
	return v, raw, true
}

// decodePolicy decodes the evaluated policy's JSON into the model and
// checks the model's rules (Check).
func decodePolicy(v cue.Value, raw []byte, fallback string, reload func() cue.Value) (*Policy, error) {
	var w wirePolicy
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("decoding policy (schema and model disagree, a bug): %w", err)
	}
	p := w.model()
	p.src = &source{v: v, fallback: fallback, reload: reload}
	if ds := p.Check(); len(ds) > 0 {
		// The warnings too: vet prints them beside the errors, not only
		// once the errors are fixed.
		ds = append(ds, p.Warnings()...)
		ds.SortByPos()
		return nil, ds
	}
	return p, nil
}

func formatPos(p token.Pos) string {
	if !p.IsValid() {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", p.Filename(), p.Line(), p.Column())
}

// source keeps the evaluated CUE value for positions only, and the
// position to give when no field nearer has one in the user's files. A
// policy and its copies (admission.SizeLocks returns one) share it, so
// ReleaseSource on any lets the value go for all.
type source struct {
	fallback string

	mu sync.Mutex
	v  cue.Value
	// reload evaluates the policy again as Load did (the same files, the
	// same positions); nil where the value is never released.
	reload   func() cue.Value
	released bool
}

// value is the evaluated CUE value, evaluated again (once) if released.
func (s *source) value() cue.Value {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		s.v, s.released = s.reload(), false
	}
	return s.v
}

// ReleaseSource lets go of the evaluated CUE value Load keeps for Pos, a
// third of a large policy's live heap (~39 MB of the 46 MB live after
// loading 1,000 queues), which every collection after would mark again:
// for a caller that asks for few positions or none from here on (vet and
// render of a valid policy ask for none). A later Pos evaluates the policy
// again, once, and answers as before; a policy from the checked path
// (one Load had to word errors for) keeps its value. Measured at 1,000
// queues: vet 0.73 → 0.61 s CPU, 142 → 118 MiB; render 1.09 → 0.93 s,
// 178 → 124 MiB.
func (p *Policy) ReleaseSource() {
	s := p.src
	if s == nil || s.reload == nil {
		return
	}
	s.mu.Lock()
	s.v, s.released = cue.Value{}, true
	s.mu.Unlock()
}

// Pos returns "file:line:col" of the policy field at the given path (e.g.
// "templates", "gpu-step", "queue"), walking up to the nearest parent that
// has a position in the policy's own files; when none has (a section the
// policy leaves out), where the policy embeds schema.#Policy.
func (p *Policy) Pos(sel ...string) string {
	if p.src == nil {
		return ""
	}
	v := p.src.value()
	if !v.Exists() {
		return ""
	}
	sels := make([]cue.Selector, len(sel))
	for i, s := range sel {
		if idx, ok := listIndex(s); ok {
			sels[i] = cue.Index(idx)
		} else {
			sels[i] = cue.Str(s)
		}
	}
	if pos := userPos(v, sels); pos != "" {
		return pos
	}
	return p.src.fallback
}

// listIndex reads a path element as a list index the way strconv.Atoi does,
// without Atoi's error for the usual case, a name (an error allocates).
func listIndex(s string) (int, bool) {
	if s == "" || !strings.ContainsAny(s[:1], "+-0123456789") {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil
}

func positionsOf(v cue.Value) []token.Pos {
	var out []token.Pos
	if pos := v.Pos(); pos.IsValid() {
		out = append(out, pos)
	}
	_, vs := v.Expr()
	for _, x := range vs {
		if pos := x.Pos(); pos.IsValid() {
			out = append(out, pos)
		}
	}
	return out
}

// PathString joins a field path the way CUE prints it:
// templates."gpu-step".queue.
func PathString(sel ...string) string {
	parts := make([]string, len(sel))
	for i, s := range sel {
		if _, ok := listIndex(s); ok {
			parts[i] = s
			continue
		}
		parts[i] = cue.MakePath(cue.Str(s)).String()
	}
	return strings.Join(parts, ".")
}
