package drift

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
)

// A Side is one end of a comparison: the render committed at the pin, the
// render at HEAD, or (with a live reader) what a cluster holds.
type Side interface {
	// Label names the side in reports: "the pin", "HEAD", "the cluster".
	Label() string
	// Source says where its objects come from: "deploy/lab at a1b2c3d".
	Source() string
	// Objects reads the side's objects.
	Objects(ctx context.Context) (Set, error)
}

// RenderAtFunc renders an environment at a commit from the commit's own
// git tree (its policy and overlay), for a commit without a committed
// render. source describes what was rendered, for reports.
type RenderAtFunc func(commit string) (files map[string][]byte, source string, err error)

// GitSide is an environment's render at one commit, read from git objects
// without a checkout: deploy/ENV when the commit has it, else the policy
// rendered at that commit through RenderAt.
type GitSide struct {
	Repo     *gitrepo.Repo
	Env      string
	Commit   gitrepo.Commit
	RenderAt RenderAtFunc
	// Name is the side's label ("the pin", "HEAD").
	Name string

	source    string
	committed bool
	set       Set
}

// Label implements Side.
func (g *GitSide) Label() string { return g.Name }

// Source implements Side (valid after Objects).
func (g *GitSide) Source() string { return g.source }

// Committed reports whether the side read a committed render (valid after
// Objects).
func (g *GitSide) Committed() bool { return g.committed }

// Objects implements Side.
func (g *GitSide) Objects(context.Context) (Set, error) {
	if g.set != nil {
		return g.set, nil
	}
	files, source, committed, err := renderAt(g.Repo, g.Env, g.Commit.Hash, g.RenderAt)
	if err != nil {
		return nil, err
	}
	set, err := Parse(files)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	g.set, g.source, g.committed = set, source, committed
	return set, nil
}

func deployDir(env string) string { return path.Join("deploy", env) }

// renderAt returns the environment's render at a commit.
func renderAt(repo *gitrepo.Repo, env, commit string, render RenderAtFunc) (files map[string][]byte, source string, committed bool, err error) {
	dir := deployDir(env)
	files, ok, err := repo.Files(commit, dir)
	if err != nil {
		return nil, "", false, err
	}
	if ok && len(files) > 0 {
		return files, fmt.Sprintf("%s at %s", dir, gitrepo.Short(commit)), true, nil
	}
	if render == nil {
		return nil, "", false, fmt.Errorf("commit %s has no %s and nothing can render it", gitrepo.Short(commit), dir)
	}
	files, source, err = render(commit)
	if err != nil {
		return nil, "", false, fmt.Errorf("commit %s has no %s, and rendering its policy failed: %w", gitrepo.Short(commit), dir, err)
	}
	return files, source, false, nil
}

// Endpoint is one side of a git comparison.
type Endpoint struct {
	Commit gitrepo.Commit `json:"commit"`
	// Source is where the render came from: "deploy/lab at a1b2c3d", or
	// the policy rendered at the commit when it has no committed render.
	Source string `json:"source"`
}

// Report is the git side of drift for one environment.
type Report struct {
	Environment string   `json:"environment"`
	Pin         Endpoint `json:"pin"`
	Head        Endpoint `json:"head"`
	// Behind is how many commits HEAD has that the pin lacks; BehindRender
	// how many of them change what the environment deploys.
	Behind       int `json:"behind"`
	BehindRender int `json:"behindRender"`
	// PinIsAncestor is false when the pin is not on HEAD's history (a
	// commit of another branch).
	PinIsAncestor bool         `json:"pinIsAncestor"`
	Differences   []Difference `json:"differences"`
	// StaleRender, when set, says that HEAD's committed render is not what
	// HEAD's policy renders (checkRender).
	StaleRender *StaleRender `json:"staleRender,omitempty"`
	// Findings are the differences as findings of rule pin-drift, and
	// StaleRender as one of rule render-stale.
	Findings []finding.Finding `json:"findings"`
}

// StaleRender is HEAD's committed render against HEAD's policy rendered
// through the overlay: how many differences in how many objects, the first
// of them ("LimitRange/experiments/gpu-memory-default spec.limits[0]..."),
// or why the policy did not render.
type StaleRender struct {
	Differences int    `json:"differences"`
	Objects     int    `json:"objects"`
	First       string `json:"first,omitempty"`
	Error       string `json:"error,omitempty"`
}

// line is the sentence text, markdown and the finding say.
func (s *StaleRender) line(env, committed string) string {
	if s.Error != "" {
		return fmt.Sprintf("HEAD's policy does not render (%s), so %s cannot be checked against it", s.Error, committed)
	}
	return fmt.Sprintf("%s is not what HEAD's policy renders (%s in %s, first %s): this report compares committed renders; commit the render with gpupolicy render --env %s --commit",
		committed, plural(s.Differences, "difference", "differences"), plural(s.Objects, "object", "objects"), s.First, env)
}

// Drifted reports whether the renders differ.
func (r *Report) Drifted() bool { return len(r.Differences) > 0 }

// Options configure a git-side comparison.
type Options struct {
	Repo *gitrepo.Repo
	// Env is the environment's name.
	Env string
	// Pin and Head are revisions; Head defaults to HEAD.
	Pin, Head string
	// PolicyDir and EnvDir are the paths, relative to the repository root,
	// whose commits change the render when a commit has no deploy/ENV.
	PolicyDir, EnvDir string
	// RenderAt renders the environment at a commit without deploy/ENV.
	RenderAt RenderAtFunc
	// Sides names the two sides in consequences (default GitSides: "the
	// pin" and "HEAD").
	Sides Sides
	// MaxBlame bounds the commits read to find which one introduced each
	// difference (0: 50; negative: do not look).
	MaxBlame int
	// CheckRender also renders HEAD's policy, when HEAD has a committed
	// render, and reports StaleRender (checkRender): the cost of one render,
	// paid by the drift command, not by the comparisons pin and the GitOps
	// engine check make.
	CheckRender bool
}

// ErrNoCommit wraps a revision that names no commit.
var ErrNoCommit = gitrepo.ErrUnknownRevision

// Git compares the environment's render at the pin with the render at
// HEAD, explains each difference, and finds the commit that introduced
// HEAD's value and how far the pin is behind.
func Git(ctx context.Context, o Options) (*Report, error) {
	if o.Head == "" {
		o.Head = "HEAD"
	}
	if o.MaxBlame == 0 {
		o.MaxBlame = 50
	}
	pin, err := o.Repo.Resolve(o.Pin)
	if err != nil {
		return nil, err
	}
	head, err := o.Repo.Resolve(o.Head)
	if err != nil {
		return nil, err
	}
	ps := &GitSide{Repo: o.Repo, Env: o.Env, Commit: pin, RenderAt: o.RenderAt, Name: GitSides.From}
	hs := &GitSide{Repo: o.Repo, Env: o.Env, Commit: head, RenderAt: o.RenderAt, Name: GitSides.To}
	from, err := ps.Objects(ctx)
	if err != nil {
		return nil, fmt.Errorf("the render at the pin: %w", err)
	}
	to, err := hs.Objects(ctx)
	if err != nil {
		return nil, fmt.Errorf("the render at HEAD: %w", err)
	}
	r := &Report{
		Environment: o.Env,
		Pin:         Endpoint{Commit: pin, Source: ps.Source()},
		Head:        Endpoint{Commit: head, Source: hs.Source()},
		Differences: Compare(from, to),
	}
	sides := o.Sides
	if sides == (Sides{}) {
		sides = GitSides
	}
	Explain(r.Differences, from, to, sides)

	behind, ancestor, err := o.Repo.Behind(pin.Hash, head.Hash)
	if err != nil {
		return nil, err
	}
	r.Behind, r.PinIsAncestor = len(behind), ancestor
	inputs := o.inputs(hs.Committed())
	var changing []gitrepo.Commit
	for _, c := range behind {
		ok, err := o.Repo.ChangedMatching(c.Hash, inputs)
		if err != nil {
			return nil, err
		}
		if ok {
			changing = append(changing, c)
		}
	}
	r.BehindRender = len(changing)
	if err := o.blame(ctx, r, to, changing, hs.Committed()); err != nil {
		return nil, err
	}
	r.Findings = Findings(RulePinDrift, r.Differences, sides)
	if o.CheckRender && hs.Committed() && o.RenderAt != nil {
		r.StaleRender = checkRender(head.Hash, to, o.RenderAt)
		if r.StaleRender != nil {
			r.Findings = append(r.Findings, RuleRenderStale.New(r.StaleRender.line(o.Env, hs.Source())))
		}
	}
	return r, nil
}

// checkRender compares HEAD's committed render with HEAD's policy rendered
// through the overlay, from git objects, object by object as drift compares
// renders: nil when they agree. render --env ENV --check, in a checkout,
// compares the files byte for byte (and the GitOps folder), so it also
// sees what no object holds, a comment or the kustomization.yaml; an
// object difference here is always one there too.
func checkRender(head string, committed Set, render RenderAtFunc) *StaleRender {
	files, _, err := render(head)
	if err != nil {
		return &StaleRender{Error: err.Error()}
	}
	rendered, err := Parse(files)
	if err != nil {
		return &StaleRender{Error: err.Error()}
	}
	ds := Compare(committed, rendered)
	if len(ds) == 0 {
		return nil
	}
	first := ds[0].Object()
	if ds[0].Path != "" {
		first += " " + ds[0].Path
	}
	return &StaleRender{Differences: len(ds), Objects: CountObjects(ds), First: first}
}

// inputs matches the paths whose changes change what the environment
// deploys: its committed render when HEAD has one, else the policy and the
// overlay (environment.yaml aside: moving the pin changes no render).
func (o Options) inputs(committed bool) func(string) bool {
	under := func(p, dir string) bool { return dir != "" && (p == dir || strings.HasPrefix(p, dir+"/")) }
	if committed {
		dir := deployDir(o.Env)
		return func(p string) bool { return under(p, dir) }
	}
	return func(p string) bool {
		return under(p, o.PolicyDir) || under(p, o.EnvDir) && p != o.EnvDir+"/environment.yaml"
	}
}

// blame sets Introduced on each difference: walking the commits that
// changed the render from HEAD back towards the pin, the oldest commit of
// the unbroken run that still has HEAD's value.
func (o Options) blame(ctx context.Context, r *Report, head Set, changing []gitrepo.Commit, committed bool) error {
	if len(changing) == 0 || len(r.Differences) == 0 || o.MaxBlame < 0 {
		return nil
	}
	if len(changing) > o.MaxBlame {
		changing = changing[:o.MaxBlame]
	}
	cache := map[string]Set{}
	setAt := func(c gitrepo.Commit) (Set, error) {
		if s, ok := cache[c.Hash]; ok {
			return s, nil
		}
		s := &GitSide{Repo: o.Repo, Env: o.Env, Commit: c, RenderAt: o.RenderAt}
		set, err := s.Objects(ctx)
		if err != nil {
			// A commit in between that does not render (a broken policy):
			// treat it as differing from HEAD.
			set = Set{}
		}
		cache[c.Hash] = set
		return set, nil
	}
	// touches tells whether commit c changed the difference's file (when
	// renders are committed), to skip reading commits that cannot matter.
	touches := func(c gitrepo.Commit, d Difference) bool {
		if !committed {
			return true
		}
		ok, err := o.Repo.ChangedIn(c.Hash, path.Join(deployDir(o.Env), d.File))
		return err != nil || ok
	}
	for i := range r.Differences {
		d := &r.Differences[i]
		var intro *gitrepo.Commit
		for _, c := range changing {
			if !touches(c, *d) {
				continue
			}
			set, err := setAt(c)
			if err != nil {
				return err
			}
			if !sameAsHead(set, head, *d) {
				break
			}
			cc := c
			intro = &cc
		}
		d.Introduced = intro
	}
	return nil
}

// sameAsHead reports whether set holds HEAD's value for the difference.
func sameAsHead(set, head Set, d Difference) bool {
	ref := d.Object()
	switch d.Change {
	case Added:
		return set[ref] != nil
	case Removed:
		return set[ref] == nil
	}
	o, h := set[ref], head[ref]
	if o == nil || h == nil {
		return false
	}
	for _, fd := range Fields(o.Body, h.Body) {
		if fd.Path == d.Path || strings.HasPrefix(fd.Path, d.Path+".") || strings.HasPrefix(fd.Path, d.Path+"[") ||
			strings.HasPrefix(d.Path, fd.Path+".") || strings.HasPrefix(d.Path, fd.Path+"[") {
			return false
		}
	}
	return true
}

// IsUnknownRevision reports whether err is a revision that names no commit.
func IsUnknownRevision(err error) bool { return errors.Is(err, gitrepo.ErrUnknownRevision) }
