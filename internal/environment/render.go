package environment

import (
	"fmt"
	"path"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render"
)

// Render renders a policy for the environment: the policy's render
// (package render) with the environment's overlay applied.
func (e *Environment) Render(p *policy.Policy) (map[string][]byte, error) {
	res, err := render.Render(p)
	if err != nil {
		return nil, err
	}
	return e.Build(res.Files)
}

// LoadAt reads environment name as it is at a commit, straight from git
// objects.
func LoadAt(repo *gitrepo.Repo, commit, name string) (*Environment, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	files, ok, err := repo.Files(commit, Dir(name))
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("commit %s has no %s", gitrepo.Short(commit), Dir(name))
	}
	return FromFiles(name, files, gitrepo.Short(commit)+":"+Dir(name))
}

// PolicyAt loads the policy in dir (relative to the repository root) as it
// is at a commit, from git objects; diagnostics name files as
// "a1b2c3d:policies/lab/queues.cue". Its locks sized from quota have their
// sizes (admission.SizeLocks), as the render at that commit has them, for
// the verbs that read them from the model (status, verify, drift --live).
func PolicyAt(repo *gitrepo.Repo, commit, dir string) (*policy.Policy, error) {
	files, ok, err := repo.Files(commit, dir)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("commit %s has no policy directory %s", gitrepo.Short(commit), dir)
	}
	cue := map[string][]byte{}
	for name, b := range files {
		// The policy is the directory's own .cue files, as policy.Load reads it.
		if !strings.Contains(name, "/") && strings.HasSuffix(name, ".cue") {
			cue[name] = b
		}
	}
	short := gitrepo.Short(commit)
	p, err := policy.LoadFiles(cue, func(name string) string { return short + ":" + path.Join(dir, name) })
	if err != nil {
		return nil, err
	}
	p, _, err = admission.SizeLocks(p)
	return p, err
}

// RenderAt renders environment name at a commit from the commit's own git
// tree: its environment directory (or current, when the commit predates the
// environment) and the policy it names. It returns the files and a line
// saying what was rendered.
func RenderAt(repo *gitrepo.Repo, commit, name string, current *Environment) (map[string][]byte, string, error) {
	env, err := LoadAt(repo, commit, name)
	overlay := fmt.Sprintf("%s at %s", Dir(name), gitrepo.Short(commit))
	if err != nil {
		if current == nil {
			return nil, "", err
		}
		env = current
		overlay = fmt.Sprintf("today's %s (the commit has none)", Dir(name))
	}
	p, err := PolicyAt(repo, commit, env.Policy)
	if err != nil {
		return nil, "", err
	}
	files, err := env.Render(p)
	if err != nil {
		return nil, "", err
	}
	return files, fmt.Sprintf("%s rendered at %s with %s (no %s there)", env.Policy, gitrepo.Short(commit), overlay, DeployDir(name)), nil
}
