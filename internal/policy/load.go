package policy

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing/fstest"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/token"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/schema"
)

// Load reads the CUE policy package in dir (its .cue files, not
// subdirectories), checks it against the embedded schema and the rules of
// this package, and returns the typed model.
//
// Errors: a finding.List (every schema or rule violation, with positions
// relative to the current directory) for a bad policy; any other error for
// I/O problems. Both are input errors (exit 2).
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
	if len(files) == 0 {
		return nil, finding.List{RulePolicyFiles.New("no .cue files in the policy directory")}
	}
	fsys := fstest.MapFS{
		"cue.mod/module.cue": {Data: []byte(schema.ModuleFile)},
	}
	schemaFiles, err := fs.Glob(schema.Files, "*.cue")
	if err != nil {
		return nil, err
	}
	for _, name := range schemaFiles {
		b, err := schema.Files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		fsys["schema/"+name] = &fstest.MapFile{Data: b}
	}
	files = normalizeLineEndings(files)
	if ds := checkFiles(files, display); len(ds) > 0 {
		return nil, ds
	}
	for name, b := range files {
		fsys["policy/"+name] = &fstest.MapFile{Data: b}
	}
	cc := &cueContext{fallback: fallbackPos(files, display)}
	fromFS := func(p string) string {
		p = strings.TrimPrefix(p, "/")
		if strings.HasPrefix(p, "policy/") {
			return display(strings.TrimPrefix(p, "policy/"))
		}
		return p // schema/policy.cue: the embedded schema
	}
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
	var w wirePolicy
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("decoding policy (schema and model disagree, a bug): %w", err)
	}
	p := w.model()
	p.src = source{v: v, fallback: cc.fallback}
	if ds := p.Check(); len(ds) > 0 {
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
// position to give when no field nearer has one in the user's files.
type source struct {
	v        cue.Value
	fallback string
}

// Pos returns "file:line:col" of the policy field at the given path (e.g.
// "templates", "gpu-step", "queue"), walking up to the nearest parent that
// has a position in the policy's own files; when none has (a section the
// policy leaves out), where the policy embeds schema.#Policy.
func (p *Policy) Pos(sel ...string) string {
	if !p.src.v.Exists() {
		return ""
	}
	sels := make([]cue.Selector, len(sel))
	for i, s := range sel {
		if idx, err := strconv.Atoi(s); err == nil {
			sels[i] = cue.Index(idx)
		} else {
			sels[i] = cue.Str(s)
		}
	}
	if pos := userPos(p.src.v, sels); pos != "" {
		return pos
	}
	return p.src.fallback
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
		if _, err := strconv.Atoi(s); err == nil {
			parts[i] = s
			continue
		}
		parts[i] = cue.MakePath(cue.Str(s)).String()
	}
	return strings.Join(parts, ".")
}
