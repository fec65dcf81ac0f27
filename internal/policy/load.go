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
	cueerrors "cuelang.org/go/cue/errors"
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
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading policy %s: %w", dir, err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cue") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		files[e.Name()] = b
	}
	display := displayRelative(dir)
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
		return nil, finding.List{RuleSchema.New("no .cue files in the policy directory")}
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
	for name, b := range files {
		fsys["policy/"+name] = &fstest.MapFile{Data: b}
	}
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
	var vals []cue.Value
	for _, inst := range insts {
		if inst.Err != nil {
			return nil, fromCUE(inst.Err, RuleSyntax)
		}
		v := ctx.BuildInstance(inst)
		if err := v.Err(); err != nil {
			return nil, fromCUE(err, RuleSchema)
		}
		vals = append(vals, v)
	}
	def := vals[1].LookupPath(cue.ParsePath("#Policy"))
	v := vals[0].Unify(def)
	if err := v.Validate(cue.Concrete(true), cue.Final()); err != nil {
		return nil, fromCUE(err, RuleSchema)
	}
	raw, err := v.MarshalJSON()
	if err != nil {
		return nil, fromCUE(err, RuleSchema)
	}
	var w wirePolicy
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("decoding policy (schema and model disagree, a bug): %w", err)
	}
	p := w.model()
	p.src = source{v: v}
	if ds := p.Check(); len(ds) > 0 {
		return nil, ds
	}
	return p, nil
}

// fromCUE converts CUE errors to findings, one per error, each with the
// position of the policy value that failed and the constraint it failed.
// rule is RuleSyntax for errors loading and parsing the files, RuleSchema
// for a failed constraint.
func fromCUE(err error, rule finding.Rule) finding.List {
	var ds finding.List
	seen := map[string]bool{}
	for _, e := range cueerrors.Errors(err) {
		pos := e.Position()
		for _, p := range e.InputPositions() {
			// Prefer a position in the policy over one in the schema.
			if !strings.HasPrefix(p.Filename(), "schema/") && p.IsValid() {
				pos = p
				break
			}
		}
		format, args := e.Msg()
		msg := fmt.Sprintf(format, args...)
		if fp := strings.Join(e.Path(), "."); fp != "" {
			msg = fp + ": " + msg
		}
		if ps := schemaPositions(e); ps != "" {
			msg += " (constraint at " + ps + ")"
		}
		d := rule.New(msg)
		d.Path, d.Pos = strings.Join(e.Path(), "."), formatPos(pos)
		if seen[d.String()] {
			continue
		}
		seen[d.String()] = true
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		ds = finding.List{rule.New(err.Error())}
	}
	ds = dropDisjunctionNoise(ds)
	ds.SortByPos()
	return ds
}

// dropDisjunctionNoise removes CUE's summary of a failed disjunction ("2
// errors in empty disjunction") and its "conflicting values" against a
// default, when a more telling error at the same position remains: for
// shares: 0 against *1 | int & >=1 the user needs "out of bound >=1", not
// "conflicting values 1 and 0".
func dropDisjunctionNoise(ds finding.List) finding.List {
	byPos := map[string]int{}
	for _, d := range ds {
		if !isDisjunctionNoise(d.Message) {
			byPos[d.Pos]++
		}
	}
	var out finding.List
	for _, d := range ds {
		if isDisjunctionNoise(d.Message) && (d.Pos == "" || byPos[d.Pos] > 0) {
			continue
		}
		out = append(out, d)
	}
	if len(out) == 0 {
		return ds
	}
	return out
}

func isDisjunctionNoise(msg string) bool {
	return strings.Contains(msg, "errors in empty disjunction") || strings.Contains(msg, ": conflicting values ")
}

func schemaPositions(e cueerrors.Error) string {
	var out []string
	for _, p := range e.InputPositions() {
		if strings.HasPrefix(p.Filename(), "schema/") {
			out = append(out, formatPos(p))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return out[0]
}

func formatPos(p token.Pos) string {
	if !p.IsValid() {
		return ""
	}
	return fmt.Sprintf("%s:%d:%d", p.Filename(), p.Line(), p.Column())
}

// source keeps the evaluated CUE value for positions only.
type source struct{ v cue.Value }

// Pos returns "file:line:col" of the policy field at the given path (e.g.
// "templates", "gpu-step", "queue"), walking up to the nearest parent that
// has a position in the policy's own files.
func (p *Policy) Pos(sel ...string) string {
	if !p.src.v.Exists() {
		return ""
	}
	for n := len(sel); n >= 0; n-- {
		sels := make([]cue.Selector, n)
		for i := range n {
			if idx, err := strconv.Atoi(sel[i]); err == nil {
				sels[i] = cue.Index(idx)
			} else {
				sels[i] = cue.Str(sel[i])
			}
		}
		fv := p.src.v.LookupPath(cue.MakePath(sels...))
		if !fv.Exists() {
			continue
		}
		for _, pos := range positionsOf(fv) {
			if !strings.HasPrefix(pos.Filename(), "schema/") {
				return formatPos(pos)
			}
		}
	}
	return ""
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
