package plan_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/gitrepo"
	"github.com/gpupolicy/gpupolicy/internal/gitrepo/gittest"
	"github.com/gpupolicy/gpupolicy/internal/plan"
)

// commitLab commits the repository's lab policy with the main lock at size.
func commitLab(t *testing.T, r *gittest.Repo, size, msg string) string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "policies", "lab", "*.cue"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(f) == "locks.cue" {
			b = bytes.Replace(b, []byte("size:        4"), []byte("size:        "+size), 1)
		}
		r.Write("policies/lab/"+filepath.Base(f), string(b))
	}
	return r.Commit(msg)
}

// The write-up's step 3: the main lock goes from one to four, and batch
// jobs with the 7B down go from 1 at once to 4.
func TestLockOneToFour(t *testing.T) {
	r := gittest.Init(t)
	base := commitLab(t, r, "1", "locks: one job at a time")
	head := commitLab(t, r, "4", "locks: raise the main lock to four")
	// The working tree changes too: plan reads git objects only.
	r.Write("policies/lab/locks.cue", "this is not CUE")
	g, err := gitrepo.Open(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := plan.Plan(plan.Options{Repo: g, Base: base, Head: "HEAD", PolicyDir: "policies/lab"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Head.Commit.Hash != head {
		t.Errorf("head %s, want %s", rep.Head.Commit.Hash, head)
	}
	var found bool
	for _, c := range rep.Admission {
		if c.Template == "gpu-step-no-cache" && c.Priority == "batch" && c.State == "qwen2-5-7b down" {
			found = true
			if c.Base == nil || c.Head == nil || c.Base.Admitted != 1 || c.Head.Admitted != 4 {
				t.Errorf("%s: want 1 → 4", c.Describe())
			}
			if c.Describe() != "batch jobs at once through gpu-step-no-cache, qwen2-5-7b down: 1 → 4" {
				t.Errorf("Describe() = %q", c.Describe())
			}
		}
		if c.Template == "gpu-step" {
			t.Errorf("gpu-step is bound by the cache lock (1) on both sides, yet changes: %s", c.Describe())
		}
	}
	if !found {
		t.Errorf("no batch row with the 7B down among %+v", rep.Admission)
	}
	var lock bool
	for _, d := range rep.Render {
		if d.Kind == "ConfigMap" && d.Path == "data.main" {
			lock = d.From == "1" && d.To == "4" && strings.Contains(d.Consequence, "still run one at a time")
		}
	}
	if !lock {
		t.Errorf("no lock difference 1 → 4 in the render diff: %+v", rep.Render)
	}
	var md bytes.Buffer
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| gpu-step-no-cache | batch | qwen2-5-7b down | 1 → **4** |") {
		t.Errorf("markdown:\n%s", md.String())
	}
}

func TestNoChange(t *testing.T) {
	r := gittest.Init(t)
	c := commitLab(t, r, "4", "policy")
	r.Write("README", "docs\n")
	r.Commit("docs")
	g, _ := gitrepo.Open(r.Dir)
	rep, err := plan.Plan(plan.Options{Repo: g, Base: c, PolicyDir: "policies/lab"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Changed() || len(rep.Admission) > 0 || len(rep.FindingsAdded)+len(rep.FindingsCleared) > 0 {
		t.Errorf("a docs-only change changes something: %+v", rep)
	}
}
