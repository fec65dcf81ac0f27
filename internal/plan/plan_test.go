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

// mainLockSize is how cmd/gpupolicy/testdata/lab-series/locks.cue sizes
// the main lock (from the general queue's quota: 4); a test that needs
// another size puts a number in its place.
const mainLockSize = `size: {fromQueue: "gpu-general", state: "on-demand-down"}`

// commitLab commits the repository's lab policy, with the locks and
// template of the write-ups' series (the main lock at size, the cache lock
// of 1) unless size is "" (the lab as it stands: no Argo lock). Size
// "quota" keeps the series' main lock sized from the general queue's quota.
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
		// The series' locks and template (cmd/gpupolicy/testdata/lab-series).
		if n := filepath.Base(f); size != "" && (n == "locks.cue" || n == "templates.cue") {
			if b, err = os.ReadFile(filepath.Join("..", "..", "cmd", "gpupolicy", "testdata", "lab-series", n)); err != nil {
				t.Fatal(err)
			}
			if n == "locks.cue" && !bytes.Contains(b, []byte(mainLockSize)) {
				t.Fatalf("lab-series/locks.cue no longer sizes the main lock with %s", mainLockSize)
			}
			if size != "quota" {
				b = bytes.Replace(b, []byte(mainLockSize), []byte("size: "+size), 1)
			}
		}
		r.Write("policies/lab/"+filepath.Base(f), string(b))
	}
	return r.Commit(msg)
}

// planSince plans policies/lab from base to HEAD in r.
func planSince(t *testing.T, r *gittest.Repo, base string) *plan.Report {
	t.Helper()
	g, err := gitrepo.Open(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := plan.Plan(plan.Options{Repo: g, Base: base, PolicyDir: "policies/lab"})
	if err != nil {
		t.Fatal(err)
	}
	return rep
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

// The main lock sized from the general queue's quota (the series' lock of
// 4, written as its derivation) follows the quota: a pull request that
// lowers the host-memory nominalQuota from 12 GiB to 10 GiB moves it from
// 4 to 3 ((10 − 4) / 2 GiB a job), and the plan says so, with the
// derivation, beside the ConfigMap's new value and the rows it moves.
func TestQuotaMovesLockSizedFromQuota(t *testing.T) {
	r := gittest.Init(t)
	base := commitLab(t, r, "quota", "locks: the main lock as the quota admits")
	queues := r.Read("policies/lab/queues.cue")
	const before = `hostMemory: nominalQuota: "12Gi"`
	if !strings.Contains(queues, before) {
		t.Fatalf("policies/lab/queues.cue no longer says %s", before)
	}
	r.Write("policies/lab/queues.cue", strings.Replace(queues, before, `hostMemory: nominalQuota: "10Gi"`, 1))
	r.Commit("queues: 10 GiB of host memory for the general queue")
	rep := planSince(t, r, base)
	if len(rep.Locks) != 1 {
		t.Fatalf("locks resized: %+v, want main alone", rep.Locks)
	}
	c := rep.Locks[0]
	if c.Lock != "main" || c.Base == nil || c.Head == nil || c.Base.Size != 4 || c.Head.Size != 3 {
		t.Fatalf("lock change %+v, want main 4 → 3", c)
	}
	const want = "lock main: 4 → 3, sized from quota at the head (lock main: 3 = jobs of gpu-step (1 share, 2,048 MiB host memory, 1,024 MiB GPU memory) ClusterQueue gpu-general admits at once with every on-demand service down (qwen2-5-7b); the next does not fit in memory)"
	if c.Describe() != want {
		t.Errorf("Describe() =\n%s\nwant\n%s", c.Describe(), want)
	}
	if !strings.Contains(c.Base.FromQuota, "lock main: 4 = ") || !strings.HasSuffix(c.Base.FromQuota, "the next does not fit in nvidia.com/gpu, memory") {
		t.Errorf("the base's derivation: %q", c.Base.FromQuota)
	}
	var row, data bool
	for _, a := range rep.Admission {
		if a.Template == "gpu-step-no-cache" && a.Priority == "batch" && a.State == "qwen2-5-7b down" {
			row = a.Base != nil && a.Head != nil && a.Base.Admitted == 4 && a.Head.Admitted == 3
		}
	}
	for _, d := range rep.Render {
		if d.Kind == "ConfigMap" && d.Path == "data.main" {
			data = d.From == "4" && d.To == "3"
		}
	}
	if !row || !data {
		t.Errorf("batch row 4 → 3: %v; ConfigMap data.main 4 → 3: %v\n%+v\n%+v", row, data, rep.Admission, rep.Render)
	}
	var md bytes.Buffer
	if err := rep.Markdown(&md); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "### Locks\n\n- "+want+"\n") {
		t.Errorf("markdown lacks the lock:\n%s", md.String())
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

// The lab as it stands: the cache lock removed after the series and the
// main lock of 4 dropped, Kueue alone gating the steps. The plan shows the
// trade-off: cache-mounting jobs 1 → 4, the cache-free ones unchanged (the
// lock of 4 never bound tighter than the quota), the lock-capacity
// warnings cleared, kueue-alone added with what it keeps and loses.
func TestKueueAloneTradeOff(t *testing.T) {
	r := gittest.Init(t)
	base := commitLab(t, r, "4", "locks: the main lock at four")
	commitLab(t, r, "", "locks: none, Kueue alone gates")
	rep := planSince(t, r, base)
	var step bool
	for _, c := range rep.Admission {
		if c.Template == "gpu-step-no-cache" {
			t.Errorf("the cache-free variant changes, though the lock of 4 never bound it: %s", c.Describe())
		}
		if c.Template == "gpu-step" && c.Priority == "batch" && c.State == "qwen2-5-7b down" {
			step = true
			if c.Base == nil || c.Head == nil || c.Base.Admitted != 1 || c.Head.Admitted != 4 || c.Base.Bound != "lock cache (1)" {
				t.Errorf("%s (bound by %+v), want 1 → 4 from the cache lock", c.Describe(), c.Base)
			}
		}
	}
	if !step {
		t.Errorf("no gpu-step batch row with the 7B down among %+v", rep.Admission)
	}
	var added bool
	for _, f := range rep.FindingsAdded {
		if f.Rule == "kueue-alone" {
			added = true
			for _, w := range []string{"Kept:", "Hand-off:", "Lost:", "DEFAULT_REQUEUE_TIME"} {
				if !strings.Contains(f.Message, w) {
					t.Errorf("kueue-alone does not say %q: %s", w, f.Message)
				}
			}
		}
	}
	if !added {
		t.Errorf("kueue-alone not added: %+v", rep.FindingsAdded)
	}
	cleared := 0
	for _, f := range rep.FindingsCleared {
		if f.Rule == "lock-capacity" {
			cleared++
		}
	}
	if cleared == 0 {
		t.Errorf("no lock-capacity finding cleared: %+v", rep.FindingsCleared)
	}
	var gone bool
	for _, d := range rep.Render {
		if d.Kind == "ConfigMap" && d.Name == "gpu-semaphore" {
			gone = true
		}
	}
	if !gone {
		t.Errorf("the semaphore ConfigMap's removal is not in the render diff: %+v", rep.Render)
	}
}

// A finding whose message changes (the batch jobs' time limit, which the
// starvation warning quotes) is listed as changed with the base's message
// beside the head's.
func TestFindingChangedShowsBoth(t *testing.T) {
	r := gittest.Init(t)
	base := commitLab(t, r, "", "lab")
	tmpl := r.Read("policies/lab/templates.cue")
	r.Write("policies/lab/templates.cue", strings.Replace(tmpl, "timeLimitSeconds: 3600", "timeLimitSeconds: 1800", 1))
	r.Commit("templates: half the time limit")
	rep := planSince(t, r, base)
	if len(rep.FindingsChanged) == 0 || len(rep.FindingsChangedFrom) != len(rep.FindingsChanged) {
		t.Fatalf("changed %v, from %v", rep.FindingsChanged, rep.FindingsChangedFrom)
	}
	for i, f := range rep.FindingsChanged {
		was := rep.FindingsChangedFrom[i]
		if was.Rule != f.Rule || was.Path != f.Path || was.Message == f.Message {
			t.Errorf("changed %d: %+v from %+v", i, f, was)
		}
	}
	var text bytes.Buffer
	if err := rep.Text(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "\n    was: "+rep.FindingsChangedFrom[0].Message+"\n") {
		t.Errorf("text lacks the base's message:\n%s", text.String())
	}
}
