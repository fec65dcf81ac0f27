package finding_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/finding"

	// Every package that declares rules, so that the registry is complete
	// (the gpupolicy binary links them all).
	_ "github.com/gpupolicy/gpupolicy/drift"
	_ "github.com/gpupolicy/gpupolicy/drift/live"
	_ "github.com/gpupolicy/gpupolicy/internal/admission"
	_ "github.com/gpupolicy/gpupolicy/internal/kube/reconcile"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	_ "github.com/gpupolicy/gpupolicy/render"
	_ "github.com/gpupolicy/gpupolicy/verify"
)

// repoRoot is the module root, two levels up.
func repoRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
	return root
}

// usedIDs collects the rule IDs the code names as literals, by file: in a
// Finding{Rule: ...} or Rule{ID: ...}, compared with a .Rule, passed to a
// rule constructor (vetRule, explainRule, verifyRule, newFinding, Lookup),
// or a Check... constant; a constant's name is resolved within its package.
// Scenario scripts are read for the rules their expected output names.
func usedIDs(t *testing.T, root string) map[string][]string {
	used := map[string][]string{}
	note := func(id, where string) {
		if id != "" {
			used[id] = append(used[id], where)
		}
	}
	type pkgFiles struct {
		consts map[string]string
		files  []*ast.File
		names  []string
	}
	pkgs := map[string]*pkgFiles{}
	fset := token.NewFileSet()
	var scripts []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "bin" || name == "out" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".txtar") && strings.Contains(path, filepath.Join("testdata", "script")) {
			scripts = append(scripts, path)
		}
		if !strings.HasSuffix(name, ".go") || strings.Contains(path, string(filepath.Separator)+"testdata"+string(filepath.Separator)) ||
			filepath.Dir(path) == filepath.Join(root, "internal", "finding") { // these tests use made-up IDs
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil // a file another change has half-written is not this test's business
		}
		dir := filepath.Dir(path)
		p := pkgs[dir]
		if p == nil {
			p = &pkgFiles{consts: map[string]string{}}
			pkgs[dir] = p
		}
		p.files = append(p.files, f)
		p.names = append(p.names, path)
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						if s, ok := stringLit(vs.Values[i]); ok {
							p.consts[n.Name] = s
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ctors := map[string]bool{"vetRule": true, "explainRule": true, "verifyRule": true, "newFinding": true, "finding.Lookup": true}
	for _, p := range pkgs {
		value := func(e ast.Expr) (string, bool) {
			if s, ok := stringLit(e); ok {
				return s, true
			}
			if id, ok := e.(*ast.Ident); ok {
				s, ok := p.consts[id.Name]
				return s, ok
			}
			return "", false
		}
		for name, c := range p.consts {
			if strings.HasPrefix(name, "Check") && isID(c) {
				note(c, "const "+name)
			}
		}
		for i, f := range p.files {
			where := func(n ast.Node) string {
				pos := fset.Position(n.Pos())
				rel, _ := filepath.Rel(root, p.names[i])
				return rel + ":" + strconv.Itoa(pos.Line)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.CompositeLit:
					key := ""
					switch typeName(x.Type) {
					case "Finding":
						key = "Rule"
					case "Rule":
						key = "ID"
					}
					for _, el := range x.Elts {
						kv, ok := el.(*ast.KeyValueExpr)
						if !ok {
							continue
						}
						if k, isIdent := kv.Key.(*ast.Ident); isIdent && k.Name == key {
							if s, ok := value(kv.Value); ok {
								note(s, where(kv))
							}
						}
					}
				case *ast.BinaryExpr:
					if x.Op != token.EQL && x.Op != token.NEQ {
						break
					}
					for _, pair := range [][2]ast.Expr{{x.X, x.Y}, {x.Y, x.X}} {
						if sel, ok := pair[0].(*ast.SelectorExpr); ok && sel.Sel.Name == "Rule" {
							if s, ok := value(pair[1]); ok {
								note(s, where(x))
							}
						}
					}
				case *ast.CallExpr:
					if ctors[funcName(x.Fun)] && len(x.Args) > 0 {
						if s, ok := value(x.Args[0]); ok {
							note(s, where(x))
						}
					}
				}
				return true
			})
		}
	}
	scriptRE := []*regexp.Regexp{
		regexp.MustCompile(`\.cue:\d+:\d+: ([a-z][a-z0-9]*(?:-[a-z0-9]+)*): `),
		regexp.MustCompile(`"rule": "([a-z][a-z0-9-]*)"`),
		regexp.MustCompile(`'\^(?:error|warning|info) \+?([a-z][a-z0-9]*(?:-[a-z0-9]+)*)`),
	}
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, s)
		for _, re := range scriptRE {
			for _, m := range re.FindAllStringSubmatch(string(b), -1) {
				note(m[1], rel)
			}
		}
	}
	return used
}

func stringLit(e ast.Expr) (string, bool) {
	bl, ok := e.(*ast.BasicLit)
	if !ok || bl.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(bl.Value)
	return s, err == nil
}

func typeName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		if pkg, ok := x.X.(*ast.Ident); ok && pkg.Name == "finding" {
			return x.Sel.Name
		}
	}
	return ""
}

func funcName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		if pkg, ok := x.X.(*ast.Ident); ok {
			return pkg.Name + "." + x.Sel.Name
		}
	}
	return ""
}

var idRE = regexp.MustCompile(`^[a-z][a-z0-9]*(-[a-z0-9]+)*$`)

func isID(s string) bool { return idRE.MatchString(s) }

// Every rule ID the code and the scenario scripts name is registered.
func TestEveryUsedIDIsRegistered(t *testing.T) {
	used := usedIDs(t, repoRoot(t))
	if len(used) < 10 {
		t.Fatalf("found only %d rule IDs in the code: the scan is broken", len(used))
	}
	for _, r := range []string{"units-mixed", "dead-preemption", "schema", "left-behind"} {
		if _, ok := used[r]; !ok {
			t.Errorf("the scan missed %s", r)
		}
	}
	var ids []string
	for id := range used {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if _, ok := finding.Lookup(id); !ok {
			t.Errorf("rule %q is used (%s) but not registered", id, strings.Join(used[id], ", "))
		}
	}
}

// One rule, one ID: units (explain) was units-mixed (vet) under another
// name, and explain never saw such a policy.
func TestNoDuplicateRules(t *testing.T) {
	if _, ok := finding.Lookup("units"); ok {
		t.Error(`"units" is registered: GPU-memory units are vet's units-mixed`)
	}
	r, ok := finding.Lookup("units-mixed")
	if !ok || r.Verb != finding.Vet {
		t.Errorf("units-mixed: %+v", r)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering an ID twice did not panic")
		}
	}()
	finding.Register(finding.Rule{ID: policy.RuleSchema.ID, Verb: finding.Explain, Severity: finding.Error, Reason: "again"})
}

func TestRegisteredRules(t *testing.T) {
	rules := finding.Rules()
	seen := map[string]bool{}
	for _, r := range rules {
		seen[r.Verb] = true
		if strings.ContainsAny(r.Reason, "\n") || len(r.Reason) > 220 {
			t.Errorf("%s: the reason is one line, in the lab's words: %q", r.ID, r.Reason)
		}
	}
	for _, v := range finding.Verbs {
		if !seen[v] {
			t.Errorf("no rule of verb %s registered", v)
		}
	}
	if got := len(finding.Rules(finding.Vet)) + len(finding.Rules(finding.Render)) + len(finding.Rules(finding.Explain)) +
		len(finding.Rules(finding.Drift)) + len(finding.Rules(finding.Verify)); got != len(rules) {
		t.Errorf("Rules by verb add up to %d, Rules() has %d", got, len(rules))
	}
}

const (
	beginMark = "<!-- rules:begin -->\n"
	endMark   = "<!-- rules:end -->"
)

// README's rules table is the registry's; its explain table lists exactly
// explain's rules with their severities. GPUPOLICY_UPDATE_README=1
// regenerates the rules table.
func TestREADMERules(t *testing.T) {
	path := filepath.Join(repoRoot(t), "README.md")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	i, j := strings.Index(readme, beginMark), strings.Index(readme, endMark)
	if i < 0 || j < i {
		t.Fatalf("README.md has no %q … %q block", beginMark, endMark)
	}
	want := finding.MarkdownTable(finding.Rules())
	if got := readme[i+len(beginMark) : j]; got != want {
		if os.Getenv("GPUPOLICY_UPDATE_README") != "" {
			readme = readme[:i+len(beginMark)] + want + readme[j:]
			if err := os.WriteFile(path, []byte(readme), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("updated %s", path)
		} else {
			t.Errorf("README.md's rules table is stale; run GPUPOLICY_UPDATE_README=1 go test ./internal/finding -run README. Want:\n%s", want)
		}
	}

	// The explain contract's table: | `rule` | severities | finds |.
	sec := readme[strings.Index(readme, "### Findings"):]
	sec = sec[:strings.Index(sec, "\n## ")]
	row := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| ((?:error|warning|info)(?:, (?:error|warning|info))*) \\| ")
	got := map[string]string{}
	for _, m := range row.FindAllStringSubmatch(sec, -1) {
		got[m[1]] = strings.ReplaceAll(m[2], ", ", "|")
	}
	rules := finding.Rules(finding.Explain)
	if len(got) != len(rules) {
		t.Errorf("README's explain table lists %d rules, the registry %d: %v", len(got), len(rules), got)
	}
	for _, r := range rules {
		if got[r.ID] != r.Severities() {
			t.Errorf("README's explain table: %s has severities %q, the registry %q", r.ID, got[r.ID], r.Severities())
		}
	}
}
