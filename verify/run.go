package verify

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/kube"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/verify/testjob"
)

// Predictor returns the admission model's prediction for jobs of a template
// at a priority in a service state.
type Predictor func(template, priority string, state State) (Prediction, error)

// Options configure Run.
type Options struct {
	// Policy is the policy the environment deploys.
	Policy *policy.Policy
	// Environment names the environment, for the report.
	Environment string
	// Template is the WorkflowTemplate to submit through; default the
	// policy's cache-free GPU step variant. Namespace is the template's.
	Template string
	// Priority is the jobs' priority; default the ladder's lowest. Run
	// refuses any other priority: verify never preempts anyone.
	Priority string
	// Levels are how many jobs to submit together, in order; Batches how
	// many times each.
	Levels  []int
	Batches int
	// Hold is how long each job holds the GPU idle after its work.
	Hold time.Duration
	// Cancel adds a batch of (predicted + 1) jobs in which one running job
	// is stopped through spec.shutdown.
	Cancel bool
	// CancelGrace is how long after the stop request verify waits for the
	// pod to end before deleting it (a simulated node cannot be signalled);
	// default 45 s, past Argo's 30 s SIGKILL.
	CancelGrace time.Duration
	// Faults adds a fault batch of (predicted + 1) jobs in which one job
	// crashes CrashAfter after its checks (default DefaultCrashAfter(Hold))
	// and, where an earlier job of the run reported a CUDA device, one
	// allocates twice its declaration beyond it (see faults.go).
	Faults     bool
	CrashAfter time.Duration
	// Exclusive adds an exclusive batch: as many jobs as the queue
	// admits, then, once they run, one job of ExclusiveTemplate (default:
	// the policy's one exclusive template) at its own priority; the
	// report's Exclusive says, from the cluster's pod and Workload
	// stamps, whether anything ran beside it (exclusive.go).
	Exclusive         bool
	ExclusiveTemplate string
	// StarveWatch is how long verify watches jobs the policy admits none of
	// (e.g. batch jobs while the 7B is up); default max(60 s, 2 × Hold).
	StarveWatch time.Duration
	// Timeout bounds the whole run; 0 picks one from the levels and hold.
	// Jobs still waiting or running at the timeout are findings.
	Timeout time.Duration
	// Poll is the observation interval; default 500 ms.
	Poll time.Duration
	// Progress receives one line whenever the running/waiting counts
	// change; nil for none.
	Progress io.Writer
	// Predict gives the prediction for each batch's service state.
	Predict Predictor
	// GPUMemory reads the card's memory; nil opens NVML (and reports why
	// not when the driver is absent). NoGPUMemory turns sampling off.
	GPUMemory   MemoryReader
	NoGPUMemory bool
	// RunID labels everything the run creates; default random.
	RunID string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Defaults.
const (
	DefaultCancelGrace = 45 * time.Second
	DefaultPoll        = 500 * time.Millisecond
	minStarveWatch     = 60 * time.Second
)

// ErrInterrupted wraps the context's error when a run is cut short (Ctrl-C);
// the returned report holds what was seen, and cleanup has run.
var ErrInterrupted = errors.New("verify interrupted")

type runner struct {
	c   Clients
	o   Options
	p   *policy.Policy
	rep *Report
	ns  string
	now func() time.Time

	configMap string // the ConfigMap the jobs mount
	deadline  time.Time
	timedOut  bool
	logsNote  string // why job logs could not be read, once
	sampler   *memorySampler
	progress  string
	deleted   []string // what the per-batch cleanups deleted
	sawCUDA   bool     // a job reported a CUDA device (its log was read)
	ex        *exclusiveWatch
}

// Run submits the verification jobs, watches them, compares what the
// cluster did with the prediction and cleans up. The error is for problems
// that stop the run (a missing template, an API error, an interrupt); the
// report's Findings hold the disagreements. On ErrInterrupted the report
// holds what was seen so far.
func Run(ctx context.Context, c Clients, o Options) (*Report, error) {
	r, err := newRunner(c, o)
	if err != nil {
		return nil, err
	}
	return r.run(ctx)
}

// Check returns the error Run would give o before it touches the cluster:
// the options against the policy (the batch's template and priority, the
// levels, --exclusive's template), so that a caller refuses bad ones
// before it connects.
func Check(o Options) error {
	_, err := newRunner(Clients{}, o)
	return err
}

func newRunner(c Clients, o Options) (*runner, error) {
	if o.Policy == nil {
		return nil, errors.New("verify: no policy")
	}
	if o.Predict == nil {
		return nil, errors.New("verify: no predictor")
	}
	p := o.Policy
	tmplName, ns, err := pickTemplate(p, o.Template)
	if err != nil {
		return nil, err
	}
	lowest := p.Ladder()
	if len(lowest) == 0 {
		return nil, errors.New("verify: the policy has no priorities")
	}
	low := lowest[len(lowest)-1].Name
	if o.Priority == "" {
		o.Priority = low
	}
	if o.Priority != low {
		return nil, fmt.Errorf("verify: priority %q: verify runs at the ladder's lowest priority (%s) only, so that it never preempts anyone", o.Priority, low)
	}
	if len(o.Levels) == 0 {
		o.Levels = []int{1, 2, 3, 4, 5}
	}
	for _, n := range o.Levels {
		if n < 1 || n > 64 {
			return nil, fmt.Errorf("verify: level %d: submit 1 to 64 jobs together", n)
		}
	}
	if o.Batches <= 0 {
		o.Batches = 1
	}
	if o.Hold < 0 {
		return nil, errors.New("verify: negative hold")
	}
	if o.CancelGrace <= 0 {
		o.CancelGrace = DefaultCancelGrace
	}
	if o.CrashAfter <= 0 {
		o.CrashAfter = DefaultCrashAfter(o.Hold)
	}
	if o.StarveWatch <= 0 {
		o.StarveWatch = max(minStarveWatch, 2*o.Hold)
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RunID == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		o.RunID = hex.EncodeToString(b[:])
	}
	if o.Timeout <= 0 {
		extras := 0
		for _, on := range []bool{o.Cancel, o.Faults, o.Exclusive} {
			if on {
				extras++
			}
		}
		o.Timeout = AutoTimeout(o.Levels, o.Batches, o.Hold, extras, o.StarveWatch)
	}
	r := &runner{c: c, o: o, p: p, ns: ns, now: o.Now}
	if o.Exclusive {
		if r.ex, err = newExclusiveWatch(p, o.ExclusiveTemplate, ns); err != nil {
			return nil, err
		}
	}
	r.rep = &Report{
		RunID: o.RunID, Environment: o.Environment, Policy: p.Name, Namespace: ns,
		Template: tmplName, Priority: o.Priority, HoldSeconds: o.Hold.Seconds(), Batches: []Batch{},
	}
	return r, nil
}

// AutoTimeout is the default bound of a run: every job of every batch run
// one after another (the worst case, a lock of one), each taking the hold
// plus two minutes of start-up and hand-off, plus extras batches (cancel,
// faults) of up to six each, one starve watch and two minutes.
func AutoTimeout(levels []int, batches int, hold time.Duration, extras int, starve time.Duration) time.Duration {
	round := hold + 2*time.Minute
	var t time.Duration
	for _, n := range levels {
		t += time.Duration(batches*n) * round
	}
	t += time.Duration(6*extras) * round
	return t + starve + 2*time.Minute
}

// pickTemplate returns the cache-free template's name and namespace (or the
// named template variant's).
func pickTemplate(p *policy.Policy, name string) (string, string, error) {
	var names []string
	for _, v := range p.Variants() {
		if (name == "" && v.CacheFree) || (name != "" && name == v.Name) {
			return v.Name, v.Template.Namespace, nil
		}
		names = append(names, v.Name)
	}
	if name == "" {
		return "", "", errors.New("verify: the policy has no cache-free GPU step template (cacheFree) to run the test job through")
	}
	return "", "", fmt.Errorf("verify: no template %q in the policy (templates: %s)", name, strings.Join(names, ", "))
}

// lockOf returns the template variant's smallest lock (policy.SmallestLock).
func lockOf(p *policy.Policy, tmpl string) *LockInfo {
	v, ok := p.Variant(tmpl)
	if !ok {
		return nil
	}
	l, ok := p.SmallestLock(v.Locks)
	if !ok {
		return nil
	}
	return &LockInfo{Name: l.Name, Size: int(l.Size)}
}

func (r *runner) run(ctx context.Context) (rep *Report, err error) {
	r.rep.Started = r.now()
	r.deadline = r.rep.Started.Add(r.o.Timeout)
	if err := r.preflight(ctx); err != nil {
		return nil, err
	}
	// Cleanup runs whatever happens, on a context of its own: the run's may
	// be cancelled (Ctrl-C) or past its deadline.
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		r.rep.Cleanup = r.cleanup(cctx, "")
		r.rep.Cleanup.Deleted = append(r.deleted, r.rep.Cleanup.Deleted...)
		r.rep.Finished = r.now()
		if rep != nil {
			Summarize(rep)
		}
	}()
	if err := r.prepareScript(ctx); err != nil {
		return nil, err
	}
	r.startSampler()

	starved := false
	for _, n := range r.o.Levels {
		for i := 1; i <= r.o.Batches; i++ {
			if r.timedOut {
				break
			}
			if starved {
				break
			}
			b, err := r.runBatch(ctx, LevelBatch, n, i)
			if b != nil {
				r.rep.Batches = append(r.rep.Batches, *b)
			}
			if err != nil {
				return r.finish(err)
			}
			if b.StarveWatchSeconds > 0 {
				starved = true
			}
		}
	}
	if starved {
		r.rep.Notes = append(r.rep.Notes, "the policy admits no job in this service state, so verify watched one batch wait and ran no other level")
	}
	for _, extra := range []struct {
		on   bool
		kind BatchKind
		what string
	}{{r.o.Cancel, CancelBatch, "cancel"}, {r.o.Faults, FaultBatch, "faults"}, {r.o.Exclusive, ExclusiveBatch, "exclusive"}} {
		if !extra.on || r.timedOut {
			continue
		}
		st, err := ReadState(ctx, r.c, r.p)
		if err != nil {
			return r.finish(err)
		}
		pred, err := r.o.Predict(r.rep.Template, r.o.Priority, st)
		if err != nil {
			return r.finish(err)
		}
		if pred.Admitted <= 0 {
			r.rep.Notes = append(r.rep.Notes, extra.what+" skipped: no job is admitted with "+st.Label())
			continue
		}
		b, err := r.runBatch(ctx, extra.kind, pred.Admitted+1, 1)
		if b != nil {
			r.rep.Batches = append(r.rep.Batches, *b)
		}
		if err != nil {
			return r.finish(err)
		}
	}
	if r.timedOut {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("the run reached its timeout (%s); the batches after it were not run", r.o.Timeout))
	}
	return r.finish(nil)
}

func (r *runner) finish(err error) (*Report, error) {
	if r.sampler != nil {
		r.rep.GPUMemory = r.sampler.finish()
		r.sampler = nil
	}
	if r.logsNote != "" {
		r.rep.Notes = append(r.rep.Notes, r.logsNote)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			r.rep.Notes = append(r.rep.Notes, "interrupted: "+err.Error())
			return r.rep, fmt.Errorf("%w: %v", ErrInterrupted, err)
		}
		return r.rep, err
	}
	return r.rep, nil
}

func (r *runner) preflight(ctx context.Context) error {
	if _, err := r.c.Dynamic.Resource(contract.GVRWorkflowTemplate).Namespace(r.ns).Get(ctx, r.rep.Template, metav1.GetOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("verify: WorkflowTemplate %s/%s is not on the cluster: deploy the environment's render first", r.ns, r.rep.Template)
		}
		return fmt.Errorf("verify: reading WorkflowTemplate %s/%s: %w", r.ns, r.rep.Template, err)
	}
	if _, err := r.c.Dynamic.Resource(contract.GVRWorkload).Namespace(r.ns).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("verify: listing Kueue Workloads (%s): %w", contract.GVRWorkload.GroupVersion(), err)
	}
	if l := lockOf(r.p, r.rep.Template); l != nil {
		l.Live = liveLockSize(ctx, r.c, r.ns, r.p.SemaphoreConfigMap, l.Name)
		r.rep.Lock = l
	}
	return nil
}

// prepareScript makes sure the test job's script is on the cluster: the
// render's ConfigMap when it holds this binary's script, else a copy for
// this run.
func (r *runner) prepareScript(ctx context.Context) error {
	if cm, err := kube.Get[corev1.ConfigMap](ctx, r.c.Dynamic, kube.GVRConfigMap, r.ns, testjob.ConfigMapName); err == nil && cm.Data[testjob.ScriptKey] == testjob.Script {
		r.configMap = testjob.ConfigMapName
		return nil
	}
	name := testjob.ConfigMapName + "-" + r.o.RunID
	u, err := toUnstructured(&corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: map[string]string{LabelRun: r.o.RunID}},
		Data:       map[string]string{testjob.ScriptKey: testjob.Script},
	})
	if err != nil {
		return err
	}
	if _, err := r.c.Dynamic.Resource(kube.GVRConfigMap).Namespace(r.ns).Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
		return fmt.Errorf("verify: creating the test job's ConfigMap %s/%s: %w", r.ns, name, err)
	}
	r.configMap = name
	r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("ConfigMap %s/%s absent or stale; the run used its own copy of the test job (%s)", r.ns, testjob.ConfigMapName, name))
	return nil
}

func (r *runner) startSampler() {
	if r.o.NoGPUMemory {
		r.rep.GPUMemory = GPUMemory{Reason: "sampling turned off"}
		return
	}
	reader := r.o.GPUMemory
	if reader == nil {
		var err error
		reader, err = OpenNVML("")
		if err != nil {
			r.rep.GPUMemory = GPUMemory{Reason: err.Error()}
			return
		}
	}
	r.sampler = startSampler(reader, time.Second)
}

// jobFault is the fault one job of a fault batch carries.
type jobFault struct {
	kind     string        // FaultCrash, FaultOverAllocate or ""
	crash    time.Duration // FaultCrash: after the checks
	allocMiB int64         // FaultOverAllocate: beyond the declaration
}

// workflow builds one job's Workflow: the template by reference at the
// verify priority, the test job's script mounted from its ConfigMap and run
// with --hold by a podSpecPatch on the main container, and the hold as the
// simulated node's run time. A crashing job runs with --crash-after and
// carries its crash time and exit code for the simulated node; an
// over-allocating one runs with --allocate-mib.
func (r *runner) workflow(name, batch string, f jobFault) (*wfv1.Workflow, error) {
	run := r.o.Hold
	var faultArgs []string
	annotations := map[string]string{}
	switch f.kind {
	case FaultCrash:
		faultArgs = testjob.CrashArgs(f.crash)
		run = f.crash
		annotations[AnnotationExitCode] = strconv.Itoa(testjob.CrashExitCode)
	case FaultOverAllocate:
		faultArgs = testjob.AllocateArgs(f.allocMiB)
	}
	patch := map[string]any{
		"containers": []any{map[string]any{
			"name":    contract.MainContainer,
			"command": testjob.Command(r.o.Hold, faultArgs...),
			"args":    nil,
			"env":     []any{map[string]any{"name": testjob.HoldEnv, "value": strconv.FormatFloat(r.o.Hold.Seconds(), 'f', -1, 64)}},
			"volumeMounts": []any{map[string]any{
				"name": testjob.VolumeName, "mountPath": testjob.MountDir, "readOnly": true,
			}},
		}},
		"volumes": []any{map[string]any{
			"name": testjob.VolumeName, "configMap": map[string]any{"name": r.configMap},
		}},
	}
	pb, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	runSeconds := int(math.Ceil(run.Seconds()))
	if runSeconds < 1 {
		runSeconds = 1
	}
	annotations[AnnotationRunSeconds] = strconv.Itoa(runSeconds)
	labels := map[string]string{LabelRun: r.o.RunID, LabelBatch: batch}
	return &wfv1.Workflow{
		TypeMeta:   metav1.TypeMeta{APIVersion: contract.ArgoAPIVersion, Kind: "Workflow"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.ns, Labels: labels},
		Spec: wfv1.WorkflowSpec{
			WorkflowTemplateRef: &wfv1.WorkflowTemplateRef{Name: r.rep.Template},
			Arguments: wfv1.Arguments{Parameters: []wfv1.Parameter{
				{Name: contract.ParamPriority, Value: wfv1.AnyStringPtr(r.o.Priority)},
			}},
			PodMetadata: &wfv1.Metadata{
				Labels:      labels,
				Annotations: annotations,
			},
			PodSpecPatch: string(pb),
		},
	}, nil
}

// jobState is what the runner tracks per job beyond Job.
type jobState struct {
	podUID      types.UID
	phase       wfv1.WorkflowPhase
	exitCode    *int32
	seenRunning time.Time // local time the container was first seen running
	logTried    bool
	podGone     bool
	deletedByUs bool
}

func (r *runner) runBatch(ctx context.Context, kind BatchKind, level, index int) (*Batch, error) {
	st, err := ReadState(ctx, r.c, r.p)
	if err != nil {
		return nil, err
	}
	pred, err := r.o.Predict(r.rep.Template, r.o.Priority, st)
	if err != nil {
		return nil, fmt.Errorf("verify: predicting for %s: %w", st.Label(), err)
	}
	b := &Batch{Kind: kind, Level: level, Index: index, State: st, Predicted: pred}
	tag := fmt.Sprintf("l%db%d", level, index)
	switch kind {
	case CancelBatch:
		tag = "cancel"
	case FaultBatch:
		tag = "faults"
	case ExclusiveBatch:
		tag = "exclusive"
	}
	starve := pred.Admitted <= 0
	if r.sampler != nil {
		r.sampler.setBatch(b.Label())
	}
	for _, n := range st.Notes {
		if !slices.Contains(r.rep.Notes, n) {
			r.rep.Notes = append(r.rep.Notes, n)
		}
	}

	b.Submitted = r.now()
	var states []*jobState
	faults := map[int]jobFault{}
	if kind == FaultBatch {
		faults = r.setUpFaults(b, tag)
	}
	// submit submits jobs from..to (from 1).
	submit := func(from, to int) error {
		for i := from; i <= to; i++ {
			name := jobName(r.o.RunID, tag, i)
			wf, err := r.workflow(name, tag, faults[i])
			if err != nil {
				return err
			}
			if kind == ExclusiveBatch && i == level {
				r.exclusiveWorkflow(b, wf)
			}
			u, err := toUnstructured(wf)
			if err != nil {
				return err
			}
			submitted := r.now()
			if _, err := r.c.Dynamic.Resource(contract.GVRWorkflow).Namespace(r.ns).Create(ctx, u, metav1.CreateOptions{FieldManager: FieldManager}); err != nil {
				return fmt.Errorf("verify: submitting Workflow %s: %w", name, err)
			}
			b.Jobs = append(b.Jobs, Job{Name: name, Index: i, Submitted: submitted, Fault: faults[i].kind})
			states = append(states, &jobState{})
		}
		return nil
	}
	// A fault batch's crashing job goes first, alone: the others follow
	// once it runs, so that they run beside it and the extra one waits for
	// a place.
	first := level
	if kind == FaultBatch {
		first = 1
	}
	// An exclusive batch's last job is the exclusive one: submitted once
	// the others run (exclusiveDue).
	if kind == ExclusiveBatch {
		first = level - 1
	}
	if err := submit(1, first); err != nil {
		return b, err
	}

	cancelAfter := min(max(r.o.Hold/3, time.Second), 20*time.Second)
	tick := time.NewTicker(r.o.Poll)
	defer tick.Stop()
	for {
		if err := r.observe(ctx, b, states); err != nil {
			if ctx.Err() != nil {
				b.Until = r.now()
				r.finalize(b, states)
				return b, ctx.Err()
			}
			return b, err
		}
		now := r.now()
		r.report(b, states, kind)
		if kind == CancelBatch {
			if err := r.cancelStep(ctx, b, states, now, cancelAfter); err != nil {
				return b, err
			}
		}
		if kind == ExclusiveBatch {
			if err := r.exclusiveObserve(ctx, b); err != nil {
				return b, err
			}
			if len(b.Jobs) < level && r.exclusiveDue(b, states) {
				r.progressf("%s: %d running; submitting the exclusive job", b.Label(), len(b.Jobs))
				if err := submit(level, level); err != nil {
					return b, err
				}
				continue
			}
		}
		if kind != ExclusiveBatch && len(b.Jobs) < level && (!states[0].seenRunning.IsZero() || !b.Jobs[0].Ended.IsZero()) {
			r.progressf("%s: %s is running; submitting the other %d", b.Label(), b.Jobs[0].Name, level-len(b.Jobs))
			if err := submit(len(b.Jobs)+1, level); err != nil {
				return b, err
			}
			continue
		}
		if len(b.Jobs) == level && r.batchDone(b, states) {
			break
		}
		if starve && now.Sub(b.Submitted) >= r.o.StarveWatch {
			b.StarveWatchSeconds = secs(now.Sub(b.Submitted))
			break
		}
		if now.After(r.deadline) {
			r.timedOut = true
			break
		}
		select {
		case <-ctx.Done():
			b.Until = r.now()
			r.finalize(b, states)
			return b, ctx.Err()
		case <-tick.C:
		}
	}
	b.Until = r.now()
	r.finalize(b, states)
	if st2, err := ReadState(ctx, r.c, r.p); err == nil {
		b.StateAfter = &st2
	}
	// Clear the batch away before the next: waiting jobs would otherwise
	// hold lock places and be admitted into the next batch's measurements.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	c := r.cleanup(cctx, tag)
	r.deleted = append(r.deleted, c.Deleted...)
	if len(c.Left) > 0 {
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("%s: still present after the batch: %s", b.Label(), strings.Join(c.Left, ", ")))
	}
	return b, nil
}

// jobName is a job's Workflow name: gpv-RUN-TAG-jN.
func jobName(run, tag string, i int) string { return fmt.Sprintf("gpv-%s-%s-j%d", run, tag, i) }

// setUpFaults records a fault batch's set-up in b.Fault and returns the
// fault of each job by index (from 1): the first crashes; the second, where
// an earlier job of the run reported a CUDA device, allocates twice its
// declaration beyond it (1,024 MiB when it declares none).
func (r *runner) setUpFaults(b *Batch, tag string) map[int]jobFault {
	f := &Fault{Crash: jobName(r.o.RunID, tag, 1), CrashAfterSeconds: secs(r.o.CrashAfter), ExitCode: testjob.CrashExitCode}
	b.Fault = f
	out := map[int]jobFault{1: {kind: FaultCrash, crash: r.o.CrashAfter}}
	switch {
	case b.Level < 2:
		f.OverAllocateSkipped = "the batch has no second job"
	case !r.sawCUDA && r.logsNote != "":
		f.OverAllocateSkipped = "no job of this run reported a CUDA device, since none of their outputs could be read: " + r.logsNote
	case !r.sawCUDA:
		f.OverAllocateSkipped = "no job of this run reported a CUDA device (they ran the CPU path, or none ran before the fault batch)"
	default:
		declared := int64(0)
		if v, ok := r.p.Variant(r.rep.Template); ok {
			declared = v.Template.Request.GPUMemoryMiB
		}
		alloc := 2 * declared
		if alloc == 0 {
			alloc = 1024
		}
		f.OverAllocate, f.AllocateMiB, f.DeclaredMiB = jobName(r.o.RunID, tag, 2), alloc, declared
		out[2] = jobFault{kind: FaultOverAllocate, allocMiB: alloc}
	}
	return out
}

// observe reads the batch's Workflows, pods and Workloads and updates the
// jobs' stamps. Stamps only move earlier: the first sighting of a state
// wins.
func (r *runner) observe(ctx context.Context, b *Batch, states []*jobState) error {
	now := r.now()
	index := map[string]int{}
	for i, j := range b.Jobs {
		index[j.Name] = i
	}
	sel := LabelRun + "=" + r.o.RunID
	wfs, err := r.c.Dynamic.Resource(contract.GVRWorkflow).Namespace(r.ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("verify: listing Workflows: %w", err)
	}
	for k := range wfs.Items {
		i, ok := index[wfs.Items[k].GetName()]
		if !ok {
			continue
		}
		var wf wfv1.Workflow
		if err := toTyped(&wfs.Items[k], &wf); err != nil {
			return err
		}
		phase, msg := workflowPhase(&wf)
		states[i].phase = phase
		if holdsLock(&wf) {
			b.Jobs[i].StepStarted = earliest(b.Jobs[i].StepStarted, now)
		} else if wf.Status.Phase.Completed() {
			// Argo releases a finished Workflow's lock when it marks it
			// final: its finishedAt, else this sighting.
			released := now
			if !wf.Status.FinishedAt.IsZero() {
				released = wf.Status.FinishedAt.Time
			}
			if c := b.Cancel; c != nil && c.Job == wf.Name {
				c.LockReleased = earliest(c.LockReleased, released)
			}
			if f := b.Fault; f != nil && f.Crash == wf.Name && r.rep.Lock != nil {
				f.LockReleased = earliest(f.LockReleased, released)
			}
		}
		if msg != "" {
			b.Jobs[i].Message = msg
		}
	}
	pods, err := kube.List[corev1.Pod](ctx, r.c.Dynamic, kube.GVRPod, r.ns, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return fmt.Errorf("verify: listing pods: %w", err)
	}
	seen := map[int]bool{}
	byUID := map[types.UID]int{}
	for k := range pods {
		pod := &pods[k]
		i, ok := index[pod.Labels[contract.LabelArgoWorkflow]]
		if !ok {
			continue
		}
		seen[i] = true
		j, s := &b.Jobs[i], states[i]
		j.Pod = pod.Name
		s.podUID = pod.UID
		byUID[pod.UID] = i
		j.PodCreated = earliest(j.PodCreated, pod.CreationTimestamp.Time)
		if j.StepStarted.IsZero() || j.StepStarted.After(j.PodCreated) {
			// The step started no later than its pod was created.
			j.StepStarted = j.PodCreated
		}
		cs := containerStatus(pod)
		if cs != nil {
			if cs.State.Running != nil {
				j.ContainerStarted = earliest(j.ContainerStarted, cs.State.Running.StartedAt.Time)
				if s.seenRunning.IsZero() {
					s.seenRunning = now
				}
			}
			if t := cs.State.Terminated; t != nil {
				if t.StartedAt.Time.Before(t.FinishedAt.Time) {
					j.ContainerStarted = earliest(j.ContainerStarted, t.StartedAt.Time)
				}
				if j.ContainerStarted.IsZero() && pod.Status.StartTime != nil {
					// The simulated node stamps a terminated container's
					// start at its end; the pod's start is the best left.
					j.ContainerStarted = pod.Status.StartTime.Time
				}
				j.Ended = earliest(j.Ended, t.FinishedAt.Time)
				code := t.ExitCode
				s.exitCode = &code
			}
		}
		if (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) && j.Ended.IsZero() && !j.ContainerStarted.IsZero() {
			j.Ended = now
		}
		if !j.Ended.IsZero() && !s.logTried {
			s.logTried = true
			r.readLog(ctx, pod, j)
		}
	}
	for i := range b.Jobs {
		j, s := &b.Jobs[i], states[i]
		if !seen[i] && j.Pod != "" && !s.podGone {
			s.podGone = true
			if !j.ContainerStarted.IsZero() && j.Ended.IsZero() {
				j.Ended = now
			}
		}
	}
	wls, err := ListWorkloads(ctx, r.c, r.ns)
	if err != nil {
		return fmt.Errorf("verify: listing Workloads: %w", err)
	}
	for k := range wls {
		w := &wls[k]
		i := -1
		for _, o := range w.OwnerReferences {
			if n, ok := byUID[o.UID]; ok {
				i = n
			}
		}
		if i < 0 {
			continue
		}
		j := &b.Jobs[i]
		j.Workload = w.Name
		if c := findCond(w, kueue.WorkloadQuotaReserved); c != nil && c.Status == metav1.ConditionTrue {
			j.Admitted = earliest(j.Admitted, c.LastTransitionTime.Time)
		} else if c := findCond(w, kueue.WorkloadAdmitted); c != nil && c.Status == metav1.ConditionTrue {
			j.Admitted = earliest(j.Admitted, c.LastTransitionTime.Time)
		} else if c := findCond(w, kueue.WorkloadQuotaReserved); c != nil && c.Message != "" && j.Admitted.IsZero() {
			j.Message = "Kueue: " + c.Message
		}
		if c := findCond(w, kueue.WorkloadFinished); c != nil && c.Status == metav1.ConditionTrue {
			j.Released = earliest(j.Released, c.LastTransitionTime.Time)
		}
	}
	return nil
}

func findCond(w *kueue.Workload, t string) *metav1.Condition {
	for i := range w.Status.Conditions {
		if w.Status.Conditions[i].Type == t {
			return &w.Status.Conditions[i]
		}
	}
	return nil
}

// readLog reads the test job's JSON line from the main container's log;
// the first failure (a simulated node serves no logs) stops further tries.
func (r *runner) readLog(ctx context.Context, pod *corev1.Pod, j *Job) {
	if r.logsNote != "" {
		return
	}
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	limit := int64(256 * 1024)
	raw, err := kube.PodLog(lctx, r.c.REST, pod.Namespace, pod.Name, contract.MainContainer, limit)
	if err != nil {
		r.logsNote = fmt.Sprintf("job logs unreadable (%s: %v): start and end come from container status, not the jobs' own stamps", pod.Name, shortErr(err))
		return
	}
	res, err := testjob.ParseLog(string(raw))
	if err != nil {
		return
	}
	j.Result = &res
	j.JobStart = res.StartTime()
	j.WorkEnded = res.EndTime()
}

func shortErr(err error) string {
	s := err.Error()
	if len(s) > 160 {
		s = s[:160] + "…"
	}
	return s
}

// cancelStep stops the first job to run once it has run cancelAfter, and
// deletes its pod if it has not ended CancelGrace after the request.
func (r *runner) cancelStep(ctx context.Context, b *Batch, states []*jobState, now time.Time, cancelAfter time.Duration) error {
	if b.Cancel == nil {
		target := -1
		for i, s := range states {
			if !s.seenRunning.IsZero() && b.Jobs[i].Ended.IsZero() && (target < 0 || s.seenRunning.Before(states[target].seenRunning)) {
				target = i
			}
		}
		if target < 0 || now.Sub(states[target].seenRunning) < cancelAfter {
			return nil
		}
		j := &b.Jobs[target]
		patch := []byte(`{"spec":{"shutdown":"` + string(wfv1.ShutdownStrategyTerminate) + `"}}`)
		b.Cancel = &Cancel{Job: j.Name, Strategy: string(wfv1.ShutdownStrategyTerminate), Requested: r.now()}
		if _, err := r.c.Dynamic.Resource(contract.GVRWorkflow).Namespace(r.ns).Patch(ctx, j.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}); err != nil {
			return fmt.Errorf("verify: stopping Workflow %s: %w", j.Name, err)
		}
		r.progressf("%s: cancelling %s (spec.shutdown=Terminate)", b.Label(), j.Name)
		return nil
	}
	i := slices.IndexFunc(b.Jobs, func(j Job) bool { return j.Name == b.Cancel.Job })
	j, s := &b.Jobs[i], states[i]
	if j.Ended.IsZero() && !s.deletedByUs && now.Sub(b.Cancel.Requested) >= r.o.CancelGrace && j.Pod != "" {
		s.deletedByUs = true
		err := r.c.Dynamic.Resource(kube.GVRPod).Namespace(r.ns).Delete(ctx, j.Pod, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("verify: deleting pod %s after the cancel grace: %w", j.Pod, err)
		}
		r.progressf("%s: %s still running %s after the stop request; deleted pod %s", b.Label(), j.Name, r.o.CancelGrace, j.Pod)
	}
	return nil
}

// batchDone: every Workflow is in a final phase and every started job's
// container has ended.
func (r *runner) batchDone(b *Batch, states []*jobState) bool {
	for i, s := range states {
		j := b.Jobs[i]
		final := s.phase == wfv1.WorkflowSucceeded || s.phase == wfv1.WorkflowFailed || s.phase == wfv1.WorkflowError
		if !final {
			return false
		}
		if !j.ContainerStarted.IsZero() && j.Ended.IsZero() {
			return false
		}
	}
	return true
}

// finalize sets each job's outcome and exit code, and the cancel's close
// and hand-off.
func (r *runner) finalize(b *Batch, states []*jobState) {
	for i := range b.Jobs {
		j, s := &b.Jobs[i], states[i]
		j.ExitCode = s.exitCode
		if j.Result != nil && j.Result.Device == "cuda" {
			r.sawCUDA = true
		}
		switch {
		case b.Cancel != nil && b.Cancel.Job == j.Name:
			j.Outcome = Cancelled
		case j.Started().IsZero() && s.phase != wfv1.WorkflowFailed && s.phase != wfv1.WorkflowError:
			j.Outcome = Waiting
		case s.phase == wfv1.WorkflowSucceeded:
			j.Outcome = Succeeded
		case s.phase == wfv1.WorkflowFailed || s.phase == wfv1.WorkflowError:
			j.Outcome = Failed
		case !j.Ended.IsZero() && s.exitCode != nil && *s.exitCode == 0:
			j.Outcome = Succeeded
		case !j.Ended.IsZero():
			j.Outcome = Failed
		default:
			j.Outcome = Unfinished
		}
		if j.Outcome == Succeeded && j.Result != nil && j.Result.Check() != nil {
			j.Outcome = Failed
		}
	}
	if b.Fault != nil {
		b.Fault.LogsUnreadable = r.logsNote
	}
	r.exclusiveFinish(b)
	c := b.Cancel
	if c == nil {
		return
	}
	i := slices.IndexFunc(b.Jobs, func(j Job) bool { return j.Name == c.Job })
	j, s := b.Jobs[i], states[i]
	if !j.Ended.IsZero() {
		c.Closed = j.Ended
		if c.Closed.Before(c.Requested) {
			// API stamps are whole seconds; the end was no earlier than
			// the request that caused it.
			c.Closed = c.Requested
		}
		switch {
		case s.deletedByUs:
			c.ClosedBy = "pod deletion after the " + fmtDur(r.o.CancelGrace) + " grace"
		case s.exitCode != nil && *s.exitCode == 0:
			c.ClosedBy = "finished on its own"
		default:
			c.ClosedBy = "argo"
		}
	}
	// The next job: the first to start among those not running when the
	// stop was requested.
	var next []Job
	for _, o := range b.Jobs {
		if o.Name != c.Job && !o.Started().IsZero() && !o.Started().Before(c.Requested.Truncate(time.Second)) {
			next = append(next, o)
		}
	}
	sort.SliceStable(next, func(a, b int) bool { return next[a].Started().Before(next[b].Started()) })
	if len(next) > 0 && !c.Closed.IsZero() {
		c.Next, c.NextStarted = next[0].Name, next[0].Started()
	}
}

// report prints the batch's progress when it changes.
func (r *runner) report(b *Batch, states []*jobState, kind BatchKind) {
	running, waiting, done := 0, 0, 0
	for _, j := range b.Jobs {
		switch {
		case !j.Ended.IsZero():
			done++
		case !j.Started().IsZero():
			running++
		default:
			waiting++
		}
	}
	what := fmt.Sprintf("level %d, batch %d/%d", b.Level, b.Index, r.o.Batches)
	if kind != LevelBatch {
		what = b.Label()
	}
	line := fmt.Sprintf("%s: %d running, %d waiting, %d done", what, running, waiting, done)
	if line != r.progress {
		r.progress = line
		r.progressf("%s", line)
	}
}

func (r *runner) progressf(format string, args ...any) {
	if r.o.Progress == nil {
		return
	}
	fmt.Fprintf(r.o.Progress, "verify: "+format+"\n", args...)
}

// cleanup deletes what the run created (only the batch's Workflows and
// pods when batch is set) and waits for it to go. It returns what it
// deleted and what is left.
func (r *runner) cleanup(ctx context.Context, batch string) *Cleanup {
	sel := LabelRun + "=" + r.o.RunID
	if batch != "" {
		sel += "," + LabelBatch + "=" + batch
	}
	c := &Cleanup{Deleted: []string{}}
	bg := metav1.DeletePropagationBackground
	list := func() []string {
		var left []string
		if l, err := r.c.Dynamic.Resource(contract.GVRWorkflow).Namespace(r.ns).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil {
			for _, it := range l.Items {
				left = append(left, "Workflow "+r.ns+"/"+it.GetName())
			}
		}
		if l, err := r.c.Dynamic.Resource(kube.GVRPod).Namespace(r.ns).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil {
			for _, it := range l.Items {
				left = append(left, "Pod "+r.ns+"/"+it.GetName())
			}
		}
		if batch == "" {
			if l, err := r.c.Dynamic.Resource(kube.GVRConfigMap).Namespace(r.ns).List(ctx, metav1.ListOptions{LabelSelector: sel}); err == nil {
				for _, it := range l.Items {
					left = append(left, "ConfigMap "+r.ns+"/"+it.GetName())
				}
			}
		}
		return left
	}
	c.Deleted = list()
	if len(c.Deleted) == 0 {
		return c
	}
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	_ = r.c.Dynamic.Resource(contract.GVRWorkflow).Namespace(r.ns).DeleteCollection(ctx, opts, metav1.ListOptions{LabelSelector: sel})
	_ = r.c.Dynamic.Resource(kube.GVRPod).Namespace(r.ns).DeleteCollection(ctx, opts, metav1.ListOptions{LabelSelector: sel})
	if batch == "" {
		_ = r.c.Dynamic.Resource(kube.GVRConfigMap).Namespace(r.ns).DeleteCollection(ctx, opts, metav1.ListOptions{LabelSelector: sel})
	}
	for {
		left := list()
		if len(left) == 0 {
			return c
		}
		select {
		case <-ctx.Done():
			c.Left = left
			return c
		case <-time.After(500 * time.Millisecond):
		}
	}
}
