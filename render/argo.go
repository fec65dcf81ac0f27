package render

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
	"github.com/gpupolicy/gpupolicy/verify/testjob"
)

// semaphoreConfigMap renders the ConfigMap that backs the locks used in one
// namespace: a key per lock, its size as the value. Its description says
// what each lock is for and, for a lock sized from quota, the queue and
// service state it follows (from sizes).
func semaphoreConfigMap(p *policy.Policy, namespace string, locks []string, sizes []admission.LockSize) Object {
	data := map[string]string{}
	var desc []string
	for _, l := range locks {
		lk := p.Locks[l]
		data[l] = strconv.FormatInt(lk.Size, 10)
		d := fmt.Sprintf("%s %d", l, lk.Size)
		var about []string
		if lk.Description != "" {
			about = append(about, lk.Description)
		}
		for _, ls := range sizes {
			if ls.Lock == l {
				about = append(about, fmt.Sprintf("as many as ClusterQueue %s admits of %s with %s", ls.Queue, ls.Template, policy.StateLabel(ls.State)))
			}
		}
		if len(about) > 0 {
			d += " (" + strings.Join(about, "; ") + ")"
		}
		desc = append(desc, d)
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(p, namespace, p.SemaphoreConfigMap, map[string]string{
			contract.AnnotationDescription: "Argo semaphores: " + strings.Join(desc, "; "),
		}),
		Data: data,
	}
	return object(cm, []string{"locks"})
}

// testJobConfigMap ships the CUDA test job (package testjob) to a job
// namespace; gpupolicy verify mounts it into the steps it submits through
// the GPU step templates.
func testJobConfigMap(p *policy.Policy, namespace string) Object {
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(p, namespace, testjob.ConfigMapName, map[string]string{
			contract.AnnotationDescription: "the CUDA test job that gpupolicy verify runs through the GPU step templates",
		}),
		Data: map[string]string{testjob.ScriptKey: testjob.Script},
	}
	return object(cm, []string{"templates"})
}

// locksByNamespace returns, per namespace that has templates, the locks its
// template variants take, sorted.
func locksByNamespace(p *policy.Policy) map[string][]string {
	sets := map[string]map[string]bool{}
	for _, v := range p.Variants() {
		ns := v.Template.Namespace
		if sets[ns] == nil {
			sets[ns] = map[string]bool{}
		}
		for _, l := range v.Locks {
			sets[ns][l] = true
		}
	}
	out := map[string][]string{}
	for ns, set := range sets {
		for l := range set {
			out[ns] = append(out[ns], l)
		}
		sort.Strings(out[ns])
	}
	return out
}

// workflowTemplates renders every template variant (policy.Variants): a
// template and, if it has one, its cache-free variant.
func workflowTemplates(p *policy.Policy) []Object {
	var out []Object
	patch := declarationPatch(p) // one policy, one patch: encoded once
	rights := p.AllowedEach()    // one pass over the queues, not one per template
	for _, v := range p.Variants() {
		r, ok := rights[v.Template.Namespace]
		if !ok {
			r = p.Allowed(v.Template.Namespace)
		}
		out = append(out, object(workflowTemplate(p, v, patch, r), v.Path()))
	}
	return out
}

// workflowTemplate renders one GPU step: a single container template that
// takes the locks in order, carries Kueue's queue and priority labels, and
// requests its shares, host memory and GPU-memory declaration. patch is
// declarationPatch(p); rights is p.Allowed of the template's namespace.
func workflowTemplate(p *policy.Policy, v policy.Variant, patch string, rights policy.Rights) *wfv1.WorkflowTemplate {
	t, locks, cache := v.Template, v.Locks, v.ModelCache
	q := p.Queues[t.Queue]
	declaration := policy.MiBString(t.Request.GPUMemoryMiB)

	res := corev1.ResourceList{}
	for _, k := range policy.Kinds {
		res[corev1.ResourceName(p.Resource(k))] = k.Quantity(t.Request.Get(k))
	}
	ctr := &corev1.Container{
		Name:      contract.MainContainer,
		Image:     t.Image,
		Command:   t.Command,
		Resources: corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()},
	}

	// Only the priorities the template's namespace may use (policy.Allowed):
	// the API server rejects a step at any other.
	var ladder []wfv1.AnyString
	for _, pr := range rights.Priorities {
		ladder = append(ladder, wfv1.AnyString(pr))
	}
	if t.Exclusive != nil {
		// An exclusive step runs at its template's priority only: the one
		// its guarantee is proved at (admission.Exclusives).
		ladder = []wfv1.AnyString{wfv1.AnyString(t.Priority)}
	}
	params := []wfv1.Parameter{
		{
			Name:        contract.ParamPriority,
			Default:     wfv1.AnyStringPtr(t.Priority),
			Enum:        ladder,
			Description: wfv1.AnyStringPtr("the step's WorkloadPriorityClass"),
		},
		{
			Name:        contract.ParamGPUMemory,
			Default:     wfv1.AnyStringPtr(declaration),
			Description: wfv1.AnyStringPtr("the GPU memory the step declares, e.g. 12452Mi: Kueue counts it against the GPU-memory quota; nothing on the card enforces it"),
		},
	}
	if t.Exclusive != nil {
		// All the GPU memory the always-on services leave, and no other
		// amount: the declaration the guarantee is proved with.
		params[1].Enum = []wfv1.AnyString{wfv1.AnyString(declaration)}
	}

	tmpl := wfv1.Template{
		Name:   contract.StepTemplate,
		Inputs: wfv1.Inputs{Parameters: params},
		Metadata: wfv1.Metadata{Labels: map[string]string{
			contract.LabelKueueQueue:    q.LocalQueue,
			contract.LabelKueuePriority: "{{inputs.parameters." + contract.ParamPriority + "}}",
		}},
		Container:    ctr,
		PodSpecPatch: patch,
	}
	if len(locks) > 0 {
		sync := &wfv1.Synchronization{}
		for _, l := range locks {
			sync.Semaphores = append(sync.Semaphores, &wfv1.SemaphoreRef{
				ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: p.SemaphoreConfigMap},
					Key:                  l,
				},
			})
		}
		tmpl.Synchronization = sync
	}
	if t.TimeLimitSeconds > 0 {
		tmpl.ActiveDeadlineSeconds = ptrTo(deadline(t.TimeLimitSeconds))
	}
	// A queue with quota on several cards gives a job the first flavor that
	// fits; Kueue skips flavors whose nodeLabels the pod's nodeSelector
	// rules out, so the step names its card's labels to be admitted on it
	// (policy.PodNodeSelector; none with anyCard).
	if sel := p.PodNodeSelector(t); sel != nil {
		tmpl.NodeSelector = sel
	}
	if cache != nil {
		tmpl.Volumes = []corev1.Volume{{
			Name: contract.ModelCacheVolume,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: cache.Claim, ReadOnly: cache.ReadOnly,
			}},
		}}
		ctr.VolumeMounts = []corev1.VolumeMount{{Name: contract.ModelCacheVolume, MountPath: cache.MountPath, ReadOnly: cache.ReadOnly}}
	}

	// Argo's UI offers the workflow arguments when submitting from the
	// template; a step called through templateRef uses the inputs' defaults.
	var args []wfv1.Parameter
	for _, pm := range params {
		args = append(args, wfv1.Parameter{Name: pm.Name, Value: pm.Default, Enum: pm.Enum})
	}

	wt := &wfv1.WorkflowTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: contract.ArgoAPIVersion, Kind: "WorkflowTemplate"},
		ObjectMeta: meta(p, t.Namespace, v.Name, map[string]string{
			contract.AnnotationVariant:         variantName(v),
			contract.AnnotationArgoDescription: templateDescription(p, v),
		}),
		Spec: wfv1.WorkflowSpec{
			Entrypoint: contract.StepTemplate,
			Arguments:  wfv1.Arguments{Parameters: args},
			Templates:  []wfv1.Template{tmpl},
		},
	}
	wt.Labels[contract.LabelTemplate] = t.Name
	return wt
}

// variantName is the variant's AnnotationVariant value.
func variantName(v policy.Variant) string {
	if v.CacheFree {
		return contract.VariantCacheFree
	}
	return contract.VariantCache
}

func templateDescription(p *policy.Policy, v policy.Variant) string {
	t, locks, cache := v.Template, v.Locks, v.ModelCache
	q := p.Queues[t.Queue]
	var b strings.Builder
	on := t.Card
	if cards := p.TemplateCards(t); len(cards) > 1 {
		on = "the first of " + strings.Join(cards, ", ") + " where it fits (Kueue's choice)"
	}
	fmt.Fprintf(&b, "GPU step on %s through LocalQueue %s (ClusterQueue %s)", on, q.LocalQueue, q.Name)
	if len(locks) > 0 {
		fmt.Fprintf(&b, "; takes the locks %s in that order", strings.Join(locks, ", "))
	}
	switch {
	case cache != nil:
		mode := "read-write"
		if cache.ReadOnly {
			mode = "read-only"
		}
		fmt.Fprintf(&b, "; mounts the model store %s at %s %s", cache.Claim, cache.MountPath, mode)
	case v.CacheFree:
		b.WriteString("; no model store, for jobs that load no model (--no-hf-cache)")
	}
	if t.Exclusive != nil {
		fmt.Fprintf(&b, "; exclusive: asks every share and all the GPU memory the always-on services leave, at %s priority, so Kueue admits nothing else beside it on the card", t.Priority)
	}
	return b.String()
}

// declarationPatch is the step's podSpecPatch. It sets the main container's
// GPU-memory declaration, requests and limits alike, from the gpu-memory
// parameter, so a job declares its own GPU memory.
//
// It also declares zero for Argo's own containers (wait, and the init
// container), which Argo adds to every container step: without it, the
// job namespace's LimitRange would give each of them the default
// declaration, and Kueue, which counts every container of a pod, would count
// a job that declares 1,024 MiB as 2,048 MiB.
func declarationPatch(p *policy.Policy) string {
	declare := func(container, amount string) patchContainer {
		r := map[string]string{p.DeclarationResource: amount}
		return patchContainer{Name: container, Resources: patchResources{Requests: r, Limits: r}}
	}
	patch := podSpecPatch{
		// Argo's order (wait, then main): the merge keeps the patch's order.
		Containers: []patchContainer{
			declare("wait", "0"),
			declare(contract.MainContainer, "{{inputs.parameters."+contract.ParamGPUMemory+"}}"),
		},
		InitContainers: []patchContainer{declare("init", "0")},
	}
	b, err := yaml.Marshal(patch)
	if err != nil {
		panic(err) // plain strings cannot fail to encode
	}
	return string(b)
}

// podSpecPatch is the part of a pod spec the patch sets (a strategic merge
// patch: containers are matched by name).
type podSpecPatch struct {
	Containers     []patchContainer `json:"containers"`
	InitContainers []patchContainer `json:"initContainers"`
}

type patchContainer struct {
	Name      string         `json:"name"`
	Resources patchResources `json:"resources"`
}

type patchResources struct {
	Requests map[string]string `json:"requests"`
	Limits   map[string]string `json:"limits"`
}

func deadline(seconds int64) intstr.IntOrString {
	if seconds <= math.MaxInt32 {
		return intstr.FromInt32(int32(seconds))
	}
	return intstr.FromString(strconv.FormatInt(seconds, 10))
}

func ptrTo[T any](v T) *T { return &v }
