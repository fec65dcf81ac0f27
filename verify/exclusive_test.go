package verify

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

func TestRecordOverlaps(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, tc := range []struct {
		name string
		rec  Record
		want bool
	}{
		{"ended the second it was admitted", Record{From: at(0), To: at(10)}, false},
		{"ended a second after", Record{From: at(0), To: at(11)}, true},
		{"began the second it ended", Record{From: at(20), To: at(30)}, false},
		{"began inside", Record{From: at(15), To: at(30)}, true},
		{"still holding, began before its end", Record{From: at(5)}, true},
		{"still holding, began after its end", Record{From: at(25)}, false},
		{"vanished between polls, never seen beside", Record{From: at(5), Vanished: true}, false},
		{"vanished, but a poll saw it beside", Record{From: at(5), Vanished: true, SeenBeside: true}, true},
	} {
		if got := tc.rec.overlaps(at(10), at(20)); got != tc.want {
			t.Errorf("%s: overlaps [10 s, 20 s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// exclusiveRunner is a runner over the lab built in Go, at the state the
// exclusive batch leaves: jobs j1..j4 evicted (their first Workloads) and
// run again after the exclusive job j5, the four models beside it, and
// extra records.
func exclusiveRunner(t *testing.T, extra ...*Record) (*runner, *Batch) {
	t.Helper()
	p := admissiontest.Lab().Obj()
	w, err := newExclusiveWatch(p, "", "experiments")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	b := &Batch{Kind: ExclusiveBatch, Level: 5, Index: 1, Submitted: at(0), Until: at(60),
		State: State{Services: map[string]string{"qwen2-5-7b": "down"}}}
	uid := 0
	rec := func(r *Record) {
		uid++
		r.uid = types.UID(strings.Repeat("u", uid))
		w.wls[r.uid] = r
	}
	for i := 1; i <= 4; i++ {
		name := "gpv-r-exclusive-j" + itoa(i)
		b.Jobs = append(b.Jobs, Job{Name: name, Index: i, Submitted: at(0), Admitted: at(1), ContainerStarted: at(2), Ended: at(6),
			Outcome: Succeeded, Workload: "pod-" + name + "-b"})
		rec(&Record{Kind: "Workload", Namespace: "experiments", Name: "pod-" + name + "-a", Queue: "gpu-general", From: at(1), To: at(5), owner: name, evicted: true})
		rec(&Record{Kind: "Workload", Namespace: "experiments", Name: "pod-" + name + "-b", Queue: "gpu-general", From: at(20), To: at(32), owner: name})
	}
	x := "gpv-r-exclusive-j5"
	b.Jobs = append(b.Jobs, Job{Name: x, Index: 5, Submitted: at(4), Admitted: at(5), ContainerStarted: at(6), Ended: at(18), Released: at(19),
		Outcome: Succeeded, Workload: "pod-" + x + "-a", Pod: x})
	rec(&Record{Kind: "Workload", Namespace: "experiments", Name: "pod-" + x + "-a", Queue: "gpu-general", From: at(5), To: at(19), owner: x})
	for _, s := range []string{"asr", "embed", "ocr", "rerank"} {
		rec(&Record{Kind: "Workload", Namespace: "models", Name: "pod-" + s + "-1", Queue: "gpu-general", From: t0.Add(-time.Hour), owner: s, service: s})
	}
	for _, r := range extra {
		rec(r)
	}
	r := &runner{p: p, ex: w, rep: &Report{Template: "gpu-step-no-cache"}, o: Options{Priority: "batch"}}
	b.Exclusive = &ExclusiveRun{Job: x, Template: w.t.Name, Priority: w.t.Priority, Jobs: w.t.Exclusive.Jobs,
		RunningAtSubmit: []string{"gpv-r-exclusive-j1", "gpv-r-exclusive-j2", "gpv-r-exclusive-j3", "gpv-r-exclusive-j4"}, Submitted: at(4),
		ResolutionSeconds: HandoffResolutionSeconds}
	return r, b
}

func TestExclusiveFinish(t *testing.T) {
	r, b := exclusiveRunner(t)
	r.exclusiveFinish(b)
	x := b.Exclusive
	want := []string{"gpv-r-exclusive-j1", "gpv-r-exclusive-j2", "gpv-r-exclusive-j3", "gpv-r-exclusive-j4"}
	if !slices.Equal(x.Evicted, want) || !slices.Equal(x.Rerun, want) {
		t.Errorf("evicted %v, rerun %v; want %v both", x.Evicted, x.Rerun, want)
	}
	if len(x.Beside) != 0 || len(x.AlwaysOn) != 4 {
		t.Errorf("beside %+v, always-on %v", x.Beside, x.AlwaysOn)
	}
	if x.Predicted != admission.ExclusiveEvicts || len(x.PredictedBeside) != 0 {
		t.Errorf("predicted %q, beside %v", x.Predicted, x.PredictedBeside)
	}
	if fs := exclusiveFindings(*b); len(fs) != 0 {
		t.Errorf("findings: %v", fs)
	}
	text := strings.Join(x.Sentences(), "\n")
	for _, s := range []string{
		"Kueue evicted 4 of them (gpv-r-exclusive-j1, gpv-r-exclusive-j2, gpv-r-exclusive-j3, gpv-r-exclusive-j4); it was admitted 1.0 s after submission and ran 12 s (succeeded).",
		"Argo ran 4 of the evicted steps again",
		"Nothing else held quota in gpu-general, gpu-large-model or ran a GPU pod in experiments, llm, models while it did",
		"The admission model predicts that it evicts the running batch jobs",
	} {
		if !strings.Contains(text, s) {
			t.Errorf("sentences lack %q:\n%s", s, text)
		}
	}
}

func TestExclusiveFindings(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	intruder := &Record{Kind: "Workload", Namespace: "side", Name: "pod-intruder-1", Queue: "gpu-general", From: t0.Add(10 * time.Second), To: t0.Add(14 * time.Second)}
	r, b := exclusiveRunner(t, intruder)
	r.exclusiveFinish(b)
	fs := exclusiveFindings(*b)
	if len(fs) != 1 || fs[0].Rule != CheckExclusiveBeside ||
		!strings.Contains(fs[0].Message, "Workload side/pod-intruder-1 held quota in gpu-general from 12:00:10 to 12:00:14 while the exclusive job gpv-r-exclusive-j5 held its quota") {
		t.Errorf("findings %v, want one %s naming the intruder", fs, CheckExclusiveBeside)
	}

	// Nothing evicted where the model says it evicts, and the exclusive
	// job never started.
	r, b = exclusiveRunner(t)
	for _, rec := range r.ex.wls {
		rec.evicted = false
	}
	i := len(b.Jobs) - 1
	b.Jobs[i].ContainerStarted, b.Jobs[i].Admitted, b.Jobs[i].Outcome = time.Time{}, time.Time{}, Waiting
	b.Jobs[0].Outcome = Failed
	r.exclusiveFinish(b)
	got := map[string]int{}
	for _, f := range exclusiveFindings(*b) {
		got[f.Rule]++
	}
	if got[CheckExclusiveNotRun] != 1 || got[CheckJobFailed] != 1 || got[CheckExclusiveModelled] != 0 {
		t.Errorf("findings by rule %v: want the exclusive job not run, j1 failed without eviction (and no model check without a start)", got)
	}
}

func TestNewExclusiveWatch(t *testing.T) {
	lab := admissiontest.Lab().Obj()
	w, err := newExclusiveWatch(lab, "", "experiments")
	if err != nil {
		t.Fatal(err)
	}
	// Sized: the shares and GPU memory the always-on models leave.
	if w.t.Name != "vllm-bench" || w.t.Request.Shares != 4 || w.t.Request.GPUMemoryMiB != 12604 ||
		!slices.Equal(w.namespaces, []string{"experiments", "llm", "models"}) || len(w.queues) != 2 {
		t.Errorf("watch: %s %+v, namespaces %v, queues %v", w.t.Name, w.t.Request, w.namespaces, w.queues)
	}
	plain := *lab
	plain.Templates = map[string]policy.Template{"gpu-step": lab.Templates["gpu-step"]}
	for _, tc := range []struct {
		p        *policy.Policy
		name, ns string
		want     string
	}{
		{&plain, "", "experiments", "the policy has no exclusive template"},
		{lab, "gpu-step", "experiments", `--exclusive-template "gpu-step": not an exclusive template of the policy (exclusive: vllm-bench)`},
		{lab, "", "other", "template vllm-bench runs in namespace experiments, the batch's template in other"},
	} {
		if _, err := newExclusiveWatch(tc.p, tc.name, tc.ns); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newExclusiveWatch(%q, %q): %v, want %q", tc.name, tc.ns, err, tc.want)
		}
	}
}

// In a queue with several cards, a Workload admitted on another flavor, or
// a pod whose nodeSelector (Kueue injects the flavor's nodeLabels) names
// another card, does not share the step's card.
func TestExclusiveWatchOnCard(t *testing.T) {
	w, err := newExclusiveWatch(admissiontest.Lab().Obj(), "", "experiments")
	if err != nil {
		t.Fatal(err)
	}
	on := func(flavor string) *kueue.Admission {
		return &kueue.Admission{ClusterQueue: "gpu-general", PodSetAssignments: []kueue.PodSetAssignment{{
			Flavors: map[corev1.ResourceName]kueue.ResourceFlavorReference{"nvidia.com/gpu": kueue.ResourceFlavorReference(flavor)}}}}
	}
	if !w.onCard(nil) || !w.onCard(on(w.t.Card)) || w.onCard(on("a100")) {
		t.Errorf("onCard: nil %v, %s %v, a100 %v; want true, true, false", w.onCard(nil), w.t.Card, w.onCard(on(w.t.Card)), w.onCard(on("a100")))
	}
	labels := w.p.Cards[w.t.Card].NodeLabels
	if len(labels) == 0 {
		t.Fatalf("the lab's card %s has no nodeLabels", w.t.Card)
	}
	same, other := map[string]string{}, map[string]string{}
	for k, v := range labels {
		same[k], other[k] = v, v+"-other"
	}
	if w.otherCard(nil) || w.otherCard(same) || !w.otherCard(other) {
		t.Errorf("otherCard: none %v, same %v, other %v; want false, false, true", w.otherCard(nil), w.otherCard(same), w.otherCard(other))
	}
}
