package policy

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"testing/fstest"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/token"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/schema"
)

// cueContext is what fromCUE knows to place a CUE error in the user's files
// and to word it: the policy package alone, the policy unified with the
// schema, the schema's #Policy, and where to point when nothing nearer is in
// the user's files. Any value may be missing (an error while loading comes
// before there is a value).
type cueContext struct {
	user     cue.Value
	unified  cue.Value
	def      cue.Value
	fallback string
	// raw builds the policy as the user wrote it, against an open stand-in
	// for the schema: its own defaults and fields, before the schema
	// decides between them.
	raw     func() cue.Value
	rawOnce sync.Once
	rawV    cue.Value
}

// rawUser is the policy without the schema (see raw).
func (cc *cueContext) rawUser() cue.Value {
	cc.rawOnce.Do(func() {
		if cc.raw != nil {
			cc.rawV = cc.raw()
		}
	})
	return cc.rawV
}

// rawPolicy builds the policy package of fsys with the schema package
// replaced by open definitions of the same names.
func rawPolicy(ctx *cue.Context, fsys fstest.MapFS, fromFS func(string) string) cue.Value {
	stub := fstest.MapFS{}
	for n, f := range fsys {
		if !isSchemaFile(n) {
			stub[n] = f
		}
	}
	var b strings.Builder
	b.WriteString("package schema\n")
	for _, l := range schemaSource() {
		if m := regexp.MustCompile(`^(#[A-Za-z]+):`).FindStringSubmatch(l); m != nil {
			b.WriteString(m[1] + ": {...} | _\n")
		}
	}
	stub["schema/stub.cue"] = &fstest.MapFile{Data: []byte(b.String())}
	insts := load.Instances([]string{"./policy"}, &load.Config{FS: stub, Dir: "/", FromFSPath: fromFS})
	if len(insts) != 1 || insts[0].Err != nil {
		return cue.Value{}
	}
	return ctx.BuildInstance(insts[0])
}

// fromCUE converts CUE errors to findings, one per error, each at a position
// in the user's files (never in the embedded schema, which the user does not
// have), on one line, with the schema's constraint in words. rule is
// RuleSyntax for errors loading and parsing the files, RuleSchema for a
// failed constraint.
func fromCUE(err error, rule finding.Rule, cc *cueContext) finding.List {
	if cc == nil {
		cc = &cueContext{}
	}
	var ds finding.List
	seen := map[string]bool{}
	// The values of each "conflicting values A and B", by field: when a
	// disjunction fails, the value the policy gave is in all of them.
	conflicts := map[string][][2]string{}
	paths := map[string][]string{}
	for _, e := range cueerrors.Errors(err) {
		format, args := e.Msg()
		msg := oneLine(shortenStrings(fmt.Sprintf(format, args...)))
		path := e.Path()
		if strings.HasPrefix(format, "conflicting values ") && len(args) >= 2 {
			fp := strings.Join(path, ".")
			conflicts[fp] = append(conflicts[fp], [2]string{fmt.Sprintf("%s", args[0]), fmt.Sprintf("%s", args[1])})
			paths[fp] = path
		}
		var userPos token.Pos
		var schemaPos []token.Pos
		for _, p := range append([]token.Pos{e.Position()}, e.InputPositions()...) {
			switch {
			case !p.IsValid():
			case isSchemaFile(p.Filename()):
				schemaPos = append(schemaPos, p)
			case !userPos.IsValid():
				userPos = p
			}
		}
		// A field the schema lacks because the model does not cover
		// it (fair sharing, TAS, DRA, MultiKueue) is refused by its own
		// rule, saying why, not reported as a typo.
		r := rule
		refused, isRefused := "", false
		if msg == "field not allowed" {
			refused, isRefused = notModelled(path)
		}
		path, msg, pos := cc.explain(path, msg, formatPos(userPos), schemaPos)
		if isRefused {
			r, msg = RuleNotModelled, refused
		}
		if pos == "" {
			pos = cc.fallback
		}
		fp := strings.Join(path, ".")
		if fp != "" {
			msg = fp + ": " + msg
		}
		d := r.New(msg)
		d.Path, d.Pos = fp, pos
		if seen[d.String()] {
			continue
		}
		seen[d.String()] = true
		ds = append(ds, d)
	}
	if len(ds) == 0 {
		d := rule.New(oneLine(err.Error()))
		d.Pos = cc.fallback
		ds = finding.List{d}
	}
	ds = dropDisjunctionNoise(ds)
	ds = cc.collapseDisjunctions(ds, conflicts, paths)
	ds.SortByPos()
	return ds
}

// collapseDisjunctions turns a field's failed disjunction that has nothing
// more telling (a summary and one "conflicting values" per choice) into one
// finding: the value the policy gave matches none of the schema's choices,
// at that value.
func (cc *cueContext) collapseDisjunctions(ds finding.List, conflicts map[string][][2]string, paths map[string][]string) finding.List {
	byPath := map[string][]int{}
	for i, d := range ds {
		if d.Path != "" {
			byPath[d.Path] = append(byPath[d.Path], i)
		}
	}
	drop := map[int]bool{}
	for path, idx := range byPath {
		pairs := conflicts[path]
		if len(pairs) == 0 || len(idx) < 2 {
			continue
		}
		all := true
		for _, i := range idx {
			all = all && isDisjunctionNoise(ds[i].Message)
		}
		if !all {
			continue
		}
		value := commonValue(pairs)
		if uv := cc.rawUser().LookupPath(cue.MakePath(selectors(paths[path])...)); uv.Exists() && uv.IsConcrete() {
			if _, isDefault := uv.Default(); !isDefault {
				if b, err := uv.MarshalJSON(); err == nil {
					value = shortenStrings(string(b))
				}
			}
		}
		if value == "" {
			continue
		}
		keep, words := idx[0], ""
		for _, i := range idx {
			if strings.Contains(ds[i].Message, ": conflicting values ") {
				keep = i
			}
			if j := strings.Index(ds[i].Message, "; the schema: "); j >= 0 && words == "" {
				words = ds[i].Message[j:]
			}
		}
		for _, i := range idx {
			drop[i] = i != keep
		}
		ds[keep].Message = fmt.Sprintf("%s: %s matches none of the schema's choices%s", path, value, words)
		if now := v1beta2Word(paths[path], value); now != "" {
			ds[keep].Message = fmt.Sprintf("%s: %s is Kueue v1beta1's word, which v1beta2 (the API gpupolicy renders) calls %q%s", path, value, now, words)
		}
	}
	var out finding.List
	for i, d := range ds {
		if !drop[i] {
			out = append(out, d)
		}
	}
	return out
}

// v1beta1Words maps a field the schema takes in Kueue v1beta2's words to
// the values Kueue v1beta1 wrote for it and their v1beta2 names: v1beta1's
// flavorFungibility Borrow and Preempt are v1beta2's MayStopSearch
// (apis/kueue/v1beta1/clusterqueue_conversion.go,
// Convert_v1beta1_ClusterQueueSpec_To_v1beta2_ClusterQueueSpec).
var v1beta1Words = map[string]map[string]string{
	"whenCanBorrow":  {"Borrow": "MayStopSearch"},
	"whenCanPreempt": {"Preempt": "MayStopSearch"},
}

// v1beta2Word is the v1beta2 name of value (JSON, as the policy wrote it)
// at path when it is Kueue v1beta1's word for the field, else "".
func v1beta2Word(path []string, value string) string {
	if len(path) == 0 {
		return ""
	}
	v, err := strconv.Unquote(value)
	if err != nil {
		return ""
	}
	return v1beta1Words[path[len(path)-1]][v]
}

// commonValue is the value every pair has in common ("" if none or more).
func commonValue(pairs [][2]string) string {
	count := map[string]int{}
	for _, p := range pairs {
		count[p[0]]++
		if p[1] != p[0] {
			count[p[1]]++
		}
	}
	var common []string
	for v, n := range count {
		if n == len(pairs) {
			common = append(common, v)
		}
	}
	if len(common) != 1 || len(pairs) < 2 {
		return ""
	}
	return shortenStrings(common[0])
}

var longStringRE = lazyRegexp(`"(?:[^"\\]|\\.){80,}"`)

// shortenStrings cuts quoted strings longer than 80 characters in a
// message to their first 60.
func shortenStrings(s string) string {
	return longStringRE().ReplaceAllStringFunc(s, func(q string) string {
		r := []rune(q)
		if len(r) <= 62 {
			return q
		}
		return string(r[:61]) + "…\""
	})
}

func isSchemaFile(name string) bool { return strings.HasPrefix(name, "schema/") }

// oneLine keeps a message on its line: CUE continues some ("previous
// declaration at ...") on the next.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	s = regexp.MustCompile(`\s*\n\s*`).ReplaceAllString(s, "; ")
	return s
}

// dropDisjunctionNoise removes CUE's summary of a failed disjunction ("2
// errors in empty disjunction") and its "conflicting values" against a
// default, when a more telling error about the same field remains: for
// shares: 0 against *1 | int & >=1 the user needs "out of bound >=1", not
// "conflicting values 1 and 0".
func dropDisjunctionNoise(ds finding.List) finding.List {
	key := func(d finding.Finding) string {
		if d.Path != "" {
			return "path " + d.Path
		}
		return "pos " + d.Pos
	}
	telling := map[string]int{}
	for _, d := range ds {
		if !isDisjunctionNoise(d.Message) {
			telling[key(d)]++
		}
	}
	var out finding.List
	for _, d := range ds {
		if isDisjunctionNoise(d.Message) && telling[key(d)] > 0 {
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

var ifFieldRE = lazyRegexp(`^\s*if\s+([A-Za-z_][A-Za-z0-9_]*)\s*==`)

// explain rewords one CUE error and finds its position in the user's
// files: a missing field is named with the struct that requires it, at the
// struct; a field the schema does not know gets the closest known name; a
// default that fails the schema is named as such; every other message gets
// the schema's constraint in words.
func (cc *cueContext) explain(path []string, msg, pos string, schemaPos []token.Pos) ([]string, string, string) {
	sels := selectors(path)
	at := func(sels []cue.Selector) string {
		if pos != "" {
			return pos
		}
		return cc.posOf(sels)
	}
	switch {
	case strings.HasPrefix(msg, "unresolved disjunction") && len(schemaPos) > 0:
		// if mode == "on-demand" { ... } in a struct without mode.
		if m := ifFieldRE().FindStringSubmatch(schemaLine(schemaPos[0])); m != nil {
			field := append(sels[:len(sels):len(sels)], cue.Str(m[1]))
			if !cc.userHas(field) {
				return append(path, m[1]), cc.missing(field), cc.posOf(sels)
			}
		}
	case msg == "field is required but not present" ||
		strings.HasPrefix(msg, "incomplete value") && len(sels) > 0 && !cc.userHas(sels):
		if len(sels) > 0 {
			return path, cc.missing(sels), cc.posOf(sels[:len(sels)-1])
		}
	case strings.HasPrefix(msg, "incomplete value") && len(sels) > 0:
		return path, cc.incomplete(sels, msg), at(sels)
	case msg == "field not allowed" && len(sels) > 0:
		return path, msg + cc.notAllowed(sels), at(sels)
	}
	if w := cc.words(sels, schemaPos); w != "" {
		msg += "; " + w
	}
	return path, msg, at(sels)
}

// missing words a required field that is not there: which struct requires
// it, and what it takes.
func (cc *cueContext) missing(sels []cue.Selector) string {
	name := sels[len(sels)-1].String()
	msg := "field is required but not present"
	decl, def, cond := cc.declaration(sels)
	if def != "" {
		msg += ": every " + def + " has " + name
	} else {
		msg += ": " + pathString(sels[:len(sels)-1]) + " must have " + name
		if d := enclosingDef(cc.declPos(sels)); d != "" {
			msg += " (schema " + d + ")"
		}
	}
	if cond != "" {
		msg += " when " + cond
	}
	if decl != "" {
		msg += ", " + constraintWords(decl)
	}
	if typo := cc.typoOf(sels[:len(sels)-1], name); typo != "" {
		msg += "; " + typo
	}
	return msg
}

// incomplete words a field the user wrote that has no concrete value: a
// default that fails the schema, or an open type.
func (cc *cueContext) incomplete(sels []cue.Selector, msg string) string {
	uv := cc.rawUser().LookupPath(cue.MakePath(sels...))
	d, ok := uv.Default()
	if !ok {
		d = uv
	}
	if d.Exists() && d.IsConcrete() {
		check := cc.unified.LookupPath(cue.MakePath(sels...)).Unify(d)
		if err := check.Validate(cue.Concrete(true)); err != nil {
			why := ""
			if es := cueerrors.Errors(err); len(es) > 0 {
				f, a := es[0].Msg()
				why = ": " + oneLine(fmt.Sprintf(f, a...))
			}
			w := cc.words(sels, nil)
			if w != "" {
				w = "; " + w
			}
			what := "the value"
			if op, _ := uv.Expr(); op == cue.OrOp || ok {
				what = "the default"
			}
			return fmt.Sprintf("%s %s fails the schema%s, so no value is left%s", what, valueString(d), why, w)
		}
	}
	w := cc.words(sels, nil)
	if w != "" {
		w = "; " + w
	}
	return "no concrete value (" + strings.TrimPrefix(msg, "incomplete value ") + ")" + w
}

// notAllowed words a field the schema does not have: the closest name the
// struct allows, or when the field exists only under a condition, which.
func (cc *cueContext) notAllowed(sels []cue.Selector) string {
	name := sels[len(sels)-1].String()
	parent := sels[:len(sels)-1]
	if cond := cc.conditionOf(parent, name); cond != "" {
		return fmt.Sprintf(": %s only when %s", name, cond)
	}
	known := cc.schemaFields(parent)
	if len(known) == 0 {
		if pat := cc.patternWords(parent); pat != "" {
			return fmt.Sprintf(": %s is not a name %s takes (%s)", strconv.Quote(unquote(name)), pathString(parent), pat)
		}
		return ""
	}
	if best := closest(unquote(name), known); best != "" {
		return fmt.Sprintf(": did you mean %s? (%s has %s)", best, defOr(cc.defName(parent), pathString(parent)), strings.Join(known, ", "))
	}
	return fmt.Sprintf(" (%s has %s)", defOr(cc.defName(parent), pathString(parent)), strings.Join(known, ", "))
}

func defOr(def, path string) string {
	if def != "" {
		return def
	}
	return path
}

// typoOf says which field of the user's struct at parent the schema does
// not know and is close to name, if one is.
func (cc *cueContext) typoOf(parent []cue.Selector, name string) string {
	uv := cc.rawUser().LookupPath(cue.MakePath(parent...))
	if !uv.Exists() {
		return ""
	}
	known := map[string]bool{}
	for _, k := range cc.schemaFields(parent) {
		known[k] = true
	}
	it, err := uv.Fields(cue.Optional(true))
	if err != nil {
		return ""
	}
	var unknown []string
	for it.Next() {
		if s := it.Selector().String(); !known[unquote(s)] {
			unknown = append(unknown, unquote(s))
		}
	}
	sort.Strings(unknown)
	for _, u := range unknown {
		if closest(u, []string{name}) != "" {
			return fmt.Sprintf("%s has %s, which the schema does not know: a misspelt %s?", pathString(parent), u, name)
		}
	}
	return ""
}

// userHas reports whether the user's files give the field a value.
func (cc *cueContext) userHas(sels []cue.Selector) bool {
	v := cc.user.LookupPath(cue.MakePath(sels...))
	if !v.Exists() {
		return false
	}
	for _, p := range positionsOf(v) {
		if !isSchemaFile(p.Filename()) {
			return true
		}
	}
	return false
}

// posOf is the position of the value at sels in the user's files, or of
// its nearest parent that has one.
func (cc *cueContext) posOf(sels []cue.Selector) string {
	for _, v := range []cue.Value{cc.user, cc.unified} {
		if pos := userPos(v, sels); pos != "" {
			return pos
		}
	}
	return cc.fallback
}

// userPos is "file:line:col" of the value at sels, or of the nearest parent
// with a position outside the schema; "" when none has one.
func userPos(root cue.Value, sels []cue.Selector) string {
	if !root.Exists() {
		return ""
	}
	// Not the root: its position is any file's; the caller's fallback is
	// better.
	for n := len(sels); n >= 1; n-- {
		fv := root.LookupPath(cue.MakePath(sels[:n]...))
		if !fv.Exists() {
			continue
		}
		// positionsOf's first, without its conjuncts (Expr evaluates
		// them anew: most of a finding's cost) when it is the user's.
		if pos := fv.Pos(); pos.IsValid() && !isSchemaFile(pos.Filename()) {
			return formatPos(pos)
		}
		for _, pos := range positionsOf(fv) {
			if !isSchemaFile(pos.Filename()) {
				return formatPos(pos)
			}
		}
	}
	return ""
}

// selectors turns a CUE error path (labels as CUE prints them, quoted when
// needed) into selectors.
func selectors(path []string) []cue.Selector {
	out := make([]cue.Selector, 0, len(path))
	for _, p := range path {
		switch {
		case strings.HasPrefix(p, `"`):
			out = append(out, cue.Str(unquote(p)))
		case strings.HasPrefix(p, "#") && ast.IsValidIdent(p):
			out = append(out, cue.Def(p))
		default:
			if i, err := strconv.Atoi(p); err == nil && i >= 0 {
				out = append(out, cue.Index(i))
			} else {
				out = append(out, cue.Str(p))
			}
		}
	}
	return out
}

func unquote(s string) string {
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

func pathString(sels []cue.Selector) string {
	if len(sels) == 0 {
		return "the policy"
	}
	return cue.MakePath(sels...).String()
}

// schemaAt is the schema's constraint for the field at sels: #Policy
// walked by name, through pattern constraints ([#Name]: #Card) and list
// elements where the name is the user's.
func (cc *cueContext) schemaAt(sels []cue.Selector) cue.Value {
	v := cc.def
	for _, s := range sels {
		if !v.Exists() {
			return v
		}
		next := v.LookupPath(cue.MakePath(s))
		if !next.Exists() && s.Type() == cue.StringLabel {
			next = v.LookupPath(cue.MakePath(s.Optional()))
		}
		if !next.Exists() {
			switch s.Type() {
			case cue.IndexLabel:
				next = v.LookupPath(cue.MakePath(cue.AnyIndex))
			default:
				next = v.LookupPath(cue.MakePath(cue.AnyString))
			}
		}
		v = next
	}
	return v
}

// schemaFields lists the fields the schema's struct at sels has (regular,
// optional and required), in schema order.
func (cc *cueContext) schemaFields(sels []cue.Selector) []string {
	v := cc.schemaAt(sels)
	if !v.Exists() {
		return nil
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var out []string
	for it.Next() {
		out = append(out, unquote(strings.TrimRight(it.Selector().String(), "?!")))
	}
	// Fields the schema declares only under a condition.
	if def, start, end := cc.defBlock(sels); def != "" {
		seen := map[string]bool{}
		for _, n := range out {
			seen[n] = true
		}
		for _, c := range conditionalFields(start, end) {
			if !seen[c.name] {
				seen[c.name] = true
				out = append(out, c.name)
			}
		}
	}
	return out
}

// patternWords says what names a pattern-constrained struct takes.
func (cc *cueContext) patternWords(sels []cue.Selector) string {
	line := cc.declLine(sels)
	m := regexp.MustCompile(`\[(#[A-Za-z]+)\]:`).FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return defWords(m[1])
}

// declaration returns the schema's declaration of the field at sels (its
// constraint as written), the definition it is declared in, and the
// condition it is declared under ("mode == \"on-demand\""), if any.
func (cc *cueContext) declaration(sels []cue.Selector) (decl, def, cond string) {
	name := unquote(sels[len(sels)-1].String())
	if line := cc.declLine(sels); line != "" {
		if m := declRE().FindStringSubmatch(line); m != nil {
			switch {
			case strings.HasPrefix(m[1], "#"):
				decl = m[1] // the definition: its doc says it
			case unquote(m[1]) == name:
				decl = withBlock(m[3], cc.declPos(sels))
			}
		}
	}
	def = cc.defName(sels[:len(sels)-1])
	if d, start, end := cc.defBlock(sels[:len(sels)-1]); d != "" {
		for _, c := range conditionalFields(start, end) {
			if c.name == name {
				cond = c.cond
				if decl == "" {
					decl = c.decl
				}
			}
		}
	}
	return decl, def, cond
}

// declLine is the schema source line that declares the field at sels.
func (cc *cueContext) declLine(sels []cue.Selector) string {
	v := cc.schemaAt(sels)
	if !v.Exists() {
		return ""
	}
	for _, p := range positionsOf(v) {
		if isSchemaFile(p.Filename()) {
			if l := schemaLine(p); declRE().MatchString(l) {
				return l
			}
		}
	}
	return ""
}

// declPos is the schema position that declares the field at sels.
func (cc *cueContext) declPos(sels []cue.Selector) token.Pos {
	v := cc.schemaAt(sels)
	if !v.Exists() {
		return token.NoPos
	}
	for _, p := range positionsOf(v) {
		if isSchemaFile(p.Filename()) && declRE().MatchString(schemaLine(p)) {
			return p
		}
	}
	return token.NoPos
}

// enclosingDef is the definition whose block holds the schema line at p.
func enclosingDef(p token.Pos) string {
	if !p.IsValid() {
		return ""
	}
	src := schemaSource()
	for i := min(p.Line(), len(src)) - 1; i >= 0; i-- {
		if m := regexp.MustCompile(`^(#[A-Za-z]+):`).FindStringSubmatch(src[i]); m != nil {
			return m[1]
		}
	}
	return ""
}

// defName is the name of the schema definition (#Service) whose struct the
// value at sels is, or "" for none.
func (cc *cueContext) defName(sels []cue.Selector) string {
	d, _, _ := cc.defBlock(sels)
	return d
}

// defBlock finds the schema definition the struct at sels is declared by:
// its name and its lines [start, end).
func (cc *cueContext) defBlock(sels []cue.Selector) (string, int, int) {
	v := cc.schemaAt(sels)
	if !v.Exists() {
		return "", 0, 0
	}
	src := schemaSource()
	for _, p := range positionsOf(v) {
		if !isSchemaFile(p.Filename()) {
			continue
		}
		// The struct's own lines: a definition "#X: {" at column 1 whose
		// block holds the position, or the field line "x: #X".
		line := schemaLine(p)
		if m := regexp.MustCompile(`^(#[A-Za-z]+):\s*\{`).FindStringSubmatch(line); m != nil && p.Column() >= 1 {
			start := p.Line() - 1
			return m[1], start, blockEnd(src, start)
		}
		if m := declRE().FindStringSubmatch(line); m != nil {
			// "x: #X", or "x: [#Name]: #X" for an element of x (whose
			// position is past the label; x's own is at the label).
			pattern := strings.HasPrefix(strings.TrimSpace(m[3]), "[")
			if pattern && p.Column() <= len(m[1])+len(line)-len(strings.TrimLeft(line, " \t")) {
				continue
			}
			if d := regexp.MustCompile(`^(?:\[[^\]]*\]:\s*)?(#[A-Za-z]+)$`).FindStringSubmatch(strings.TrimSpace(m[3])); d != nil {
				d := d[1]
				for i, l := range src {
					if strings.HasPrefix(l, d+":") {
						return d, i, blockEnd(src, i)
					}
				}
			}
		}
	}
	return "", 0, 0
}

func blockEnd(src []string, start int) int {
	depth := 0
	for i := start; i < len(src); i++ {
		depth += strings.Count(src[i], "{") - strings.Count(src[i], "}")
		if depth <= 0 && i > start {
			return i + 1
		}
		if depth <= 0 && !strings.Contains(src[i], "{") {
			return i + 1
		}
	}
	return len(src)
}

type condField struct{ name, cond, decl string }

// conditionalFields lists the fields declared inside "if COND {" blocks
// among the schema lines [start, end).
func conditionalFields(start, end int) []condField {
	src := schemaSource()
	var out []condField
	cond := ""
	for i := start; i < end && i < len(src); i++ {
		l := src[i]
		if m := regexp.MustCompile(`^\s*if\s+(.*?)\s*\{\s*$`).FindStringSubmatch(l); m != nil {
			cond = m[1]
			continue
		}
		if cond != "" && strings.TrimSpace(l) == "}" {
			cond = ""
			continue
		}
		if cond != "" {
			if m := declRE().FindStringSubmatch(l); m != nil {
				out = append(out, condField{name: unquote(m[1]), cond: cond, decl: m[3]})
			}
		}
	}
	return out
}

// conditionOf is the condition under which the schema declares field in
// the struct at parent, when it declares it only under one.
func (cc *cueContext) conditionOf(parent []cue.Selector, field string) string {
	field = unquote(field)
	v := cc.schemaAt(parent)
	if v.Exists() && v.LookupPath(cue.MakePath(cue.Str(field))).Exists() {
		return ""
	}
	_, start, end := cc.defBlock(parent)
	for _, c := range conditionalFields(start, end) {
		if c.name == field {
			return c.cond
		}
	}
	return ""
}

// words says the schema's constraint of the field at sels in words, from
// its declaration (or, failing that, the schema line of the error).
func (cc *cueContext) words(sels []cue.Selector, schemaPos []token.Pos) string {
	var decl string
	if len(sels) > 0 {
		decl, _, _ = cc.declaration(sels)
	}
	if decl == "" {
		for _, p := range schemaPos {
			if m := declRE().FindStringSubmatch(schemaLine(p)); m != nil {
				decl = withBlock(m[3], p)
				if strings.HasPrefix(m[1], "#") {
					decl = m[1] // a definition: its doc says it
				}
				break
			}
		}
	}
	if decl == "" {
		return ""
	}
	name := "the value"
	if n := len(sels); n > 0 {
		name = unquote(sels[n-1].String())
		if sels[n-1].Type() == cue.IndexLabel && n > 1 {
			name = "each of " + unquote(sels[n-2].String())
		}
	}
	return "the schema: " + name + " is " + constraintWords(decl)
}

// withBlock completes a declaration that opens a struct on its line
// ("exclusive?: {", declared at p) with the struct's shape (blockShape),
// so that it reads whole: {jobs: "wait" | "evict"}. Any other declaration
// is returned as it is.
func withBlock(decl string, p token.Pos) string {
	if !strings.HasSuffix(decl, "{") || balanced(decl) || !p.IsValid() {
		return decl
	}
	return strings.TrimSuffix(decl, "{") + blockShape(p.Line()-1)
}

// blockShape is the struct the schema line start (0-based) opens, short:
// its fields with their constraints, "{jobs: "wait" | "evict"}"; a struct
// nested in it as {...}; the field names alone ("{claim, mountPath,
// readOnly}") when that runs past 120 characters. Fields declared under
// a condition (if mode == ...) are left out.
func blockShape(start int) string {
	src := schemaSource()
	end := blockEnd(src, start)
	var fields, names []string
	depth := 0
	for i := start + 1; i < end-1 && i < len(src); i++ {
		l := src[i]
		if m := declRE().FindStringSubmatch(l); m != nil && depth == 0 {
			c := m[3]
			if strings.HasSuffix(c, "{") && !balanced(c) {
				c = strings.TrimSuffix(c, "{") + "{...}"
			}
			fields = append(fields, m[1]+m[2]+": "+c)
			names = append(names, m[1]+m[2])
		}
		code, _, _ := strings.Cut(l, "//")
		depth += strings.Count(code, "{") - strings.Count(code, "}")
	}
	if shape := "{" + strings.Join(fields, ", ") + "}"; len(shape) <= 120 {
		return shape
	}
	return "{" + strings.Join(names, ", ") + "}"
}

var declRE = lazyRegexp(`^\s*(#?[A-Za-z_][A-Za-z0-9_]*|"[^"]+")([?!]?):\s*(.*?)\s*(//.*)?$`)

var (
	schemaOnce  sync.Once
	schemaLines []string
	defDocs     map[string]string
)

// schemaSource is the embedded schema's lines (one file, policy.cue).
func schemaSource() []string {
	schemaOnce.Do(func() {
		b, _ := schema.Files.ReadFile("policy.cue")
		schemaLines = strings.Split(string(b), "\n")
		defDocs = map[string]string{}
		for i, l := range schemaLines {
			m := regexp.MustCompile(`^(#[A-Za-z]+):`).FindStringSubmatch(l)
			if m == nil {
				continue
			}
			var doc []string
			for j := i - 1; j >= 0 && strings.HasPrefix(schemaLines[j], "//"); j-- {
				doc = append([]string{strings.TrimSpace(strings.TrimPrefix(schemaLines[j], "//"))}, doc...)
			}
			defDocs[m[1]] = firstSentence(strings.TrimPrefix(strings.Join(doc, " "), m[1]+" is "))
		}
	})
	return schemaLines
}

func firstSentence(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.Index(s, ". "); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSuffix(s, ".")
}

// schemaLine is the schema's source line at p.
func schemaLine(p token.Pos) string {
	src := schemaSource()
	if l := p.Line(); l >= 1 && l <= len(src) {
		return src[l-1]
	}
	return ""
}

// defWords is a definition's doc comment, first sentence: "#HostMemory"
// → "host (node) memory as a Kubernetes quantity in Mi or Gi (...)".
func defWords(def string) string {
	schemaSource()
	if w := defDocs[def]; w != "" {
		return w
	}
	return def
}

// The regular expressions that word CUE's errors, compiled on first use:
// a policy that vets never needs them, and compiling them at package init
// cost every run (vet, render) some 0.2 ms before main (issue 17).
var (
	intBoundsRE = lazyRegexp(`^(>=|>|<=|<)(-?[0-9]+|#MaxMiB)$`)
	minRunesRE  = lazyRegexp(`^strings\.MinRunes\(([0-9]+)\)$`)
	maxRunesRE  = lazyRegexp(`^strings\.MaxRunes\(([0-9]+)\)$`)
	defRefRE    = lazyRegexp(`^#[A-Za-z]+$`)
	listRE      = lazyRegexp(`^\[(#[A-Za-z]+,\s*)?\.\.\.(.+)\]$`)
)

// constraintWords says a schema constraint as written in words:
// "int & >=1 & <=64" → "an integer from 1 to 64"; "*1 | (int & >=1)" →
// "an integer from 1 (default 1)"; "#Name" → the definition's doc.
func constraintWords(c string) string {
	c = strings.TrimSpace(c)
	if c == "" {
		return ""
	}
	if alts := splitTop(c, '|'); len(alts) > 1 {
		var def string
		var parts []string
		quoted := allQuoted(alts)
		for _, a := range alts {
			a = strings.TrimSpace(a)
			if strings.HasPrefix(a, "*") {
				def = strings.TrimPrefix(a, "*")
				if !quoted && len(alts) > 1 {
					continue // "*1 | (int & >=1)": the default is one of the rest
				}
				a = def
			}
			parts = append(parts, constraintWords(a))
		}
		s := "one of " + strings.Join(parts, ", ")
		switch {
		case len(parts) == 1:
			s = parts[0]
		case !quoted && len(parts) == 2:
			s = parts[0] + ", or " + parts[1]
		}
		if def != "" {
			s += " (default " + def + ")"
		}
		return s
	}
	if strings.HasPrefix(c, "(") && strings.HasSuffix(c, ")") && len(splitTop(c[1:len(c)-1], '|')) >= 1 && balanced(c[1:len(c)-1]) {
		return constraintWords(c[1 : len(c)-1])
	}
	parts := splitTop(c, '&')
	var kind string
	var lo, hi string
	var extra []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		switch {
		case p == "int":
			kind = "an integer"
		case p == "string":
			kind = "a string"
		case p == "bool":
			kind = "true or false"
		case p == "_|_":
			return "not allowed"
		case intBoundsRE().MatchString(p):
			m := intBoundsRE().FindStringSubmatch(p)
			n := m[2]
			if n == "#MaxMiB" {
				n = "1073741824 (1 PiB in MiB)"
			}
			switch m[1] {
			case ">=":
				lo = n
			case ">":
				if v, err := strconv.Atoi(n); err == nil {
					lo = strconv.Itoa(v + 1)
				} else {
					lo = "above " + n
				}
			case "<=":
				hi = n
			case "<":
				if v, err := strconv.Atoi(n); err == nil {
					hi = strconv.Itoa(v - 1)
				} else {
					hi = "below " + n
				}
			}
		case minRunesRE().MatchString(p):
			if minRunesRE().FindStringSubmatch(p)[1] == "1" {
				extra = append(extra, "not empty")
			} else {
				extra = append(extra, "at least "+minRunesRE().FindStringSubmatch(p)[1]+" characters")
			}
		case maxRunesRE().MatchString(p):
			extra = append(extra, "at most "+maxRunesRE().FindStringSubmatch(p)[1]+" characters")
		case strings.HasPrefix(p, "=~"):
			extra = append(extra, "matching "+strings.TrimPrefix(p, "=~"))
		case defRefRE().MatchString(p):
			extra = append(extra, defWords(p))
		case listRE().MatchString(p):
			m := listRE().FindStringSubmatch(p)
			if m[1] != "" {
				extra = append(extra, "a list of at least one element, each "+constraintWords(m[2]))
			} else {
				extra = append(extra, "a list, each element "+constraintWords(m[2]))
			}
		case strings.HasPrefix(p, "[") || strings.HasPrefix(p, "{"):
			extra = append(extra, "a "+map[bool]string{true: "list", false: "struct"}[strings.HasPrefix(p, "[")]+" "+p)
		default:
			extra = append(extra, p)
		}
	}
	var s string
	switch {
	case kind == "" && len(extra) > 0:
		return strings.Join(extra, ", ")
	case lo != "" && hi != "":
		s = fmt.Sprintf("%s from %s to %s", kind, lo, hi)
	case lo != "":
		s = fmt.Sprintf("%s of at least %s", kind, lo)
	case hi != "":
		s = fmt.Sprintf("%s of at most %s", kind, hi)
	default:
		s = kind
	}
	if len(extra) > 0 {
		s += ", " + strings.Join(extra, ", ")
	}
	return s
}

func allQuoted(alts []string) bool {
	for _, a := range alts {
		a = strings.TrimPrefix(strings.TrimSpace(a), "*")
		if !strings.HasPrefix(a, `"`) {
			return false
		}
	}
	return true
}

func balanced(s string) bool {
	depth := 0
	for _, r := range s {
		switch r {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
			if depth < 0 {
				return false
			}
		}
	}
	return depth == 0
}

// splitTop splits s at sep outside brackets and quotes.
func splitTop(s string, sep rune) []string {
	var out []string
	depth, start := 0, 0
	inStr := false
	for i, r := range s {
		switch {
		case r == '"' && (i == 0 || s[i-1] != '\\'):
			inStr = !inStr
		case inStr:
		case r == '(' || r == '[' || r == '{':
			depth++
		case r == ')' || r == ']' || r == '}':
			depth--
		case r == sep && depth == 0:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// closest returns the name among known nearest to name, when it is near
// enough to be a misspelling (optimal string alignment distance at most 2,
// and less than half the name).
func closest(name string, known []string) string {
	best, bestD := "", 3
	for _, k := range known {
		d := osaDistance(strings.ToLower(name), strings.ToLower(k))
		if d < bestD && d*2 < max(len(name), len(k)) {
			best, bestD = k, d
		}
	}
	return best
}

// osaDistance is the optimal string alignment distance: insertions,
// deletions, substitutions and transpositions of adjacent runes.
func osaDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range rb {
		d[0][j+1] = j + 1
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}

// valueString prints a concrete value as CUE would write it.
func valueString(v cue.Value) string {
	if s, err := v.String(); err == nil {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// lazyRegexp compiles expr on the first call of the function it returns
// (regexp.MustCompile: expr is a constant, a bad one panics on first use).
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
