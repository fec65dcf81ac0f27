package admission_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/policy"
)

// largeLab is the lab with a second template in gpu-general, gpu-large,
// whose job asks 5 shares: with the four always-on models holding 4 of
// the 8, it never fits while they run, and no preemption makes room (they
// are always-on, the highest rung). gpu-general gets the strategy.
func largeLab(strategy string, large *TemplateWrapper) *policy.Policy {
	p := Lab().Template(large).Obj()
	q := p.Queues["gpu-general"]
	q.QueueingStrategy = strategy
	p.Queues["gpu-general"] = q
	return p
}

func gpuLarge(shares, hostMiB int64) *TemplateWrapper {
	return MakeTemplate("gpu-large").Queue("gpu-general").Card("rtx-5060-ti").Request(shares, hostMiB, 1024)
}

func queueingOf(t *testing.T, r *admission.Report, queue string) admission.Queueing {
	t.Helper()
	for _, q := range r.Queueing {
		if q.Queue == queue {
			return q
		}
	}
	t.Fatalf("no queueing entry for %s in %+v", queue, r.Queueing)
	return admission.Queueing{}
}

// blockSummary is a block as "head@prio how [state] -> waits...", one line
// per state.
func blockSummary(bs []admission.Block) []string {
	var out []string
	for _, b := range bs {
		for _, w := range b.When {
			var who []string
			for _, x := range w.Waits {
				n := x.Template
				if x.Service != "" {
					n = "svc:" + x.Service
				}
				who = append(who, n+"@"+x.Priority)
			}
			out = append(out, fmt.Sprintf("%s@%s %s %s %s ahead=%d short=%v reserved=%v -> %s",
				b.Head.Template, b.Head.Priority, b.Head.Outcome, b.How, policy.StateLabel(w.State), w.Ahead, w.Short, w.Reserved, strings.Join(who, ",")))
		}
	}
	return out
}

func TestQueueingBestEffortFIFONoBlocks(t *testing.T) {
	for name, p := range map[string]*policy.Policy{
		"lab":                   Lab().Obj(),
		"large, BestEffortFIFO": largeLab(policy.BestEffortFIFO, gpuLarge(5, GiB(2))),
	} {
		t.Run(name, func(t *testing.T) {
			r := explain(t, p)
			if len(r.Queueing) != 2 {
				t.Fatalf("queueing has %d entries, want one per ClusterQueue (2)", len(r.Queueing))
			}
			for _, q := range r.Queueing {
				if q.Strategy != policy.BestEffortFIFO || len(q.Blocks) != 0 {
					t.Errorf("%s: strategy %s, %d blocks; want BestEffortFIFO and none", q.Queue, q.Strategy, len(q.Blocks))
				}
			}
			for _, f := range r.Findings {
				if f.Rule == admission.RuleStrictFIFOBlocked.ID {
					t.Errorf("BestEffortFIFO reported %s", f)
				}
			}
		})
	}
}

// TestQueueingStrictFIFOHead: with the 7B down, the gpu-large head (short
// of shares: 4 left, it asks 5) holds off gpu-step jobs at its priority
// and below, which fit (4 shares, 8 GiB left); its reservation (it would
// borrow: 4 + 5 > 8, so it reserves its whole request) holds off the 7B
// coming up in gpu-large-model, for heads at or above the 7B's priority
// (the cycle takes them first). With the 7B up, gpu-step does not fit
// either (404 MiB of GPU memory left): no block.
func TestQueueingStrictFIFOHead(t *testing.T) {
	r := explain(t, largeLab(policy.StrictFIFO, gpuLarge(5, GiB(2))))
	q := queueingOf(t, r, "gpu-general")
	if q.Strategy != policy.StrictFIFO || q.States != 2 || !q.Exact {
		t.Fatalf("gpu-general: %+v", q)
	}
	got := blockSummary(q.Blocks)
	want := []string{
		"gpu-large@batch wait behind-head qwen2-5-7b down ahead=0 short=[nvidia.com/gpu] reserved=map[] -> gpu-step@batch",
		"gpu-large@on-demand-llm wait behind-head qwen2-5-7b down ahead=0 short=[nvidia.com/gpu] reserved=map[] -> gpu-step@on-demand-llm,gpu-step@batch",
		"gpu-large@training wait behind-head qwen2-5-7b down ahead=0 short=[nvidia.com/gpu] reserved=map[] -> gpu-step@training,gpu-step@on-demand-llm,gpu-step@batch",
		"gpu-large@on-demand-llm wait reserved-quota qwen2-5-7b down ahead=0 short=[nvidia.com/gpu] reserved=map[gpupolicy.dev/gpu-memory:1Gi memory:2Gi nvidia.com/gpu:5] -> svc:qwen2-5-7b@on-demand-llm",
		"gpu-large@training wait reserved-quota qwen2-5-7b down ahead=0 short=[nvidia.com/gpu] reserved=map[gpupolicy.dev/gpu-memory:1Gi memory:2Gi nvidia.com/gpu:5] -> svc:qwen2-5-7b@on-demand-llm",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var f *finding.Finding
	for i := range r.Findings {
		if r.Findings[i].Rule == admission.RuleStrictFIFOBlocked.ID {
			f = &r.Findings[i]
		}
	}
	if f == nil {
		t.Fatal("no strict-fifo-blocked finding")
	}
	if f.Severity != finding.Warning || f.Path != `queues."gpu-general".queueingStrategy` {
		t.Errorf("finding %+v", f)
	}
	for _, w := range []string{
		"queue gpu-general is StrictFIFO",
		"With every on-demand service down, one batch job of gpu-large (short of nvidia.com/gpu, 0 admitted before it) holds off gpu-step jobs at batch in gpu-general, which would be admitted at once",
		"And 2 more (-o json: queueing)",
		"They wait until the head is admitted",
	} {
		if !strings.Contains(f.Message, w) {
			t.Errorf("message lacks %q:\n%s", w, f.Message)
		}
	}
	// Text and markdown list every block on a line.
	var text, md bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	line := "gpu-general: gpu-large at training (short of nvidia.com/gpu) holds off service qwen2-5-7b at on-demand-llm in gpu-large-model, by the quota it reserves, in 1 of 2 service states"
	if !strings.Contains(text.String(), "  "+line+"\n") {
		t.Errorf("text lacks %q:\n%s", line, text.String())
	}
	if !strings.Contains(md.String(), "- `gpu-general`: "+strings.TrimPrefix(line, "gpu-general: ")+"\n") {
		t.Errorf("markdown lacks the block line:\n%s", md.String())
	}
}

// TestQueueingReclaimAnyReservesNothing: with reclaimWithinCohort Any the
// scheduler is sure to reclaim later (preemption.CanAlwaysReclaim) and
// reserves nothing: the 7B comes up; the in-queue block stays.
func TestQueueingReclaimAnyReservesNothing(t *testing.T) {
	p := largeLab(policy.StrictFIFO, gpuLarge(5, GiB(2)))
	q := p.Queues["gpu-general"]
	q.Preemption.ReclaimWithinCohort = "Any"
	p.Queues["gpu-general"] = q
	r := explain(t, p)
	for _, b := range queueingOf(t, r, "gpu-general").Blocks {
		if b.How == admission.HowReservedQuota {
			t.Errorf("reclaimWithinCohort Any, yet a reserved-quota block: %v", blockSummary([]admission.Block{b}))
		}
	}
	if n := len(queueingOf(t, r, "gpu-general").Blocks); n != 3 {
		t.Errorf("%d blocks, want the 3 behind-head ones", n)
	}
}

// TestQueueingNeverFitsHead: a head that asks more host memory than
// gpu-general could ever hold (16 GiB against 12) is never admitted, so
// what waits behind it in a StrictFIFO queue waits until it is deleted:
// an error. It reserves nothing (NoFit, not Preempt).
func TestQueueingNeverFitsHead(t *testing.T) {
	r := explain(t, largeLab(policy.StrictFIFO, gpuLarge(1, GiB(16))))
	q := queueingOf(t, r, "gpu-general")
	if len(q.Blocks) == 0 {
		t.Fatal("no block behind a head that never fits")
	}
	for _, b := range q.Blocks {
		if b.Head.Outcome != "no-fit" || b.How != admission.HowBehindHead {
			t.Errorf("block %v: want a no-fit head, behind-head", blockSummary([]admission.Block{b}))
		}
	}
	// gpu-step at batch waits behind a batch gpu-large head in both states?
	// No: with the 7B up gpu-step does not fit either.
	for _, b := range q.Blocks {
		if len(b.When) != 1 || b.When[0].State["qwen2-5-7b"] != policy.ServiceDown {
			t.Errorf("block %v: want the 7B-down state only", blockSummary([]admission.Block{b}))
		}
	}
	found := false
	for _, f := range r.Findings {
		if f.Rule == admission.RuleStrictFIFOBlocked.ID {
			found = true
			if f.Severity != finding.Error || !strings.Contains(f.Message, "A gpu-large job never fits (it asks more than gpu-general could ever hold), so what waits behind it waits until it is deleted") {
				t.Errorf("finding %s: %s", f.Severity, f.Message)
			}
		}
	}
	if !found {
		t.Error("no strict-fifo-blocked finding")
	}
}

// TestQueueingServiceHead: a StrictFIFO gpu-large-model whose 7B cannot
// come up while another on-demand service (whisper, 8,000 MiB in
// gpu-general) is up: the 7B waits at the head, and the llm-step jobs
// queued behind it (at its priority or below), which fit, wait too. Its
// reservation holds off nothing: gpu-general's jobs do not borrow, so the
// cycle takes them before the borrowing 7B.
func TestQueueingServiceHead(t *testing.T) {
	p := Lab().
		Service(MakeService("whisper").OnDemand(600).Queue("gpu-general").Card("rtx-5060-ti").Priority("always-on").Request(1, GiB(1), 8000)).
		Template(MakeTemplate("llm-step").Namespace("llm").Queue("gpu-large-model").Card("rtx-5060-ti").Priority("on-demand-llm").Request(1, GiB(1), 256)).
		Obj()
	q := p.Queues["gpu-large-model"]
	q.QueueingStrategy = policy.StrictFIFO
	p.Queues["gpu-large-model"] = q
	r := explain(t, p)
	got := blockSummary(queueingOf(t, r, "gpu-large-model").Blocks)
	want := []string{
		"@on-demand-llm wait behind-head qwen2-5-7b down, whisper up ahead=0 short=[gpupolicy.dev/gpu-memory] reserved=map[] -> llm-step@on-demand-llm,llm-step@batch",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("blocks:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	b := queueingOf(t, r, "gpu-large-model").Blocks[0]
	if b.Head.Service != "qwen2-5-7b" || b.Head.Template != "" {
		t.Errorf("head %+v, want the 7B", b.Head)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if line := "  gpu-large-model: service qwen2-5-7b at on-demand-llm (short of gpupolicy.dev/gpu-memory) holds off llm-step at on-demand-llm, llm-step at batch, behind it, in 1 of 3 service states\n"; !strings.Contains(text.String(), line) {
		t.Errorf("text lacks %q:\n%s", line, text.String())
	}
}
