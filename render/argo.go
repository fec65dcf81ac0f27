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

	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/verify/testjob"
)

const argoAPIVersion = "argoproj.io/v1alpha1"

// The GPU step's names, shared by every WorkflowTemplate gpupolicy renders.
const (
	// StepTemplate is the one template (and entrypoint) of a
	// WorkflowTemplate; call it with templateRef {name: <template>,
	// template: gpu-step}.
	StepTemplate = "gpu-step"
	// MainContainer is Argo's name for a container template's container.
	MainContainer = "main"
	// ParamPriority names the WorkloadPriorityClass of a step.
	ParamPriority = "priority"
	// ParamGPUMemory is the step's GPU-memory declaration, e.g. "12452Mi".
	ParamGPUMemory = "gpu-memory"
	// ModelCacheVolume is the volume of the shared model store.
	ModelCacheVolume = "model-cache"
)

// Template variants (AnnotationVariant).
const (
	VariantCache     = "cache"
	VariantCacheFree = "cache-free"
)

// semaphoreConfigMap renders the ConfigMap that backs the locks used in one
// namespace: a key per lock, its size as the value.
func semaphoreConfigMap(p *policy.Policy, namespace string, locks []string) Object {
	data := map[string]string{}
	var desc []string
	for _, l := range locks {
		lk := p.Locks[l]
		data[l] = strconv.FormatInt(lk.Size, 10)
		d := fmt.Sprintf("%s %d", l, lk.Size)
		if lk.Description != "" {
			d += " (" + lk.Description + ")"
		}
		desc = append(desc, d)
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(p, namespace, p.SemaphoreConfigMap, map[string]string{
			AnnotationDescription: "Argo semaphores: " + strings.Join(desc, "; "),
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
			AnnotationDescription: "the CUDA test job that gpupolicy verify runs through the GPU step templates",
		}),
		Data: map[string]string{testjob.ScriptKey: testjob.Script},
	}
	return object(cm, []string{"templates"})
}

// locksByNamespace returns, per namespace that has templates, the locks its
// templates (both variants) take, sorted.
func locksByNamespace(p *policy.Policy) map[string][]string {
	sets := map[string]map[string]bool{}
	for _, n := range p.TemplateNames() {
		t := p.Templates[n]
		if sets[t.Namespace] == nil {
			sets[t.Namespace] = map[string]bool{}
		}
		for _, l := range t.Locks {
			sets[t.Namespace][l] = true
		}
		if t.CacheFree != nil {
			for _, l := range t.CacheFree.Locks {
				sets[t.Namespace][l] = true
			}
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

// workflowTemplates renders a template and, if it has one, its cache-free
// variant.
func workflowTemplates(p *policy.Policy, t policy.Template) []Object {
	out := []Object{object(workflowTemplate(p, t, t.Name, VariantCache, t.Locks, t.ModelCache), []string{"templates", t.Name})}
	if t.CacheFree != nil {
		out = append(out, object(workflowTemplate(p, t, t.CacheFree.Name, VariantCacheFree, t.CacheFree.Locks, nil), []string{"templates", t.Name, "cacheFree"}))
	}
	return out
}

// workflowTemplate renders one GPU step: a single container template that
// takes the locks in order, carries Kueue's queue and priority labels, and
// requests its shares, host memory and GPU-memory declaration.
func workflowTemplate(p *policy.Policy, t policy.Template, name, variant string, locks []string, cache *policy.ModelCache) *wfv1.WorkflowTemplate {
	q := p.Queues[t.Queue]
	declaration := gpuMemoryString(t.Request.GPUMemoryMiB)

	res := corev1.ResourceList{
		corev1.ResourceName(p.SharesResource()):    shares(t.Request.Shares),
		corev1.ResourceMemory:                      hostMemory(t.Request.HostMemoryMiB),
		corev1.ResourceName(p.DeclarationResource): gpuMemory(t.Request.GPUMemoryMiB),
	}
	ctr := &corev1.Container{
		Name:      MainContainer,
		Image:     t.Image,
		Command:   t.Command,
		Resources: corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()},
	}

	var ladder []wfv1.AnyString
	for _, pr := range p.Ladder() {
		ladder = append(ladder, wfv1.AnyString(pr.Name))
	}
	params := []wfv1.Parameter{
		{
			Name:        ParamPriority,
			Default:     wfv1.AnyStringPtr(t.Priority),
			Enum:        ladder,
			Description: wfv1.AnyStringPtr("the step's WorkloadPriorityClass"),
		},
		{
			Name:        ParamGPUMemory,
			Default:     wfv1.AnyStringPtr(declaration),
			Description: wfv1.AnyStringPtr("the GPU memory the step declares, e.g. 12452Mi: Kueue counts it against the GPU-memory quota; nothing on the card enforces it"),
		},
	}

	tmpl := wfv1.Template{
		Name:   StepTemplate,
		Inputs: wfv1.Inputs{Parameters: params},
		Metadata: wfv1.Metadata{Labels: map[string]string{
			LabelKueueQueue:    q.LocalQueue,
			LabelKueuePriority: "{{inputs.parameters." + ParamPriority + "}}",
		}},
		Container:    ctr,
		PodSpecPatch: declarationPatch(p),
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
	// rules out, so the step names its card's labels to be admitted on it.
	if len(q.Flavors) > 1 && len(p.Cards[t.Card].NodeLabels) > 0 {
		tmpl.NodeSelector = p.Cards[t.Card].NodeLabels
	}
	if cache != nil {
		tmpl.Volumes = []corev1.Volume{{
			Name: ModelCacheVolume,
			VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
				ClaimName: cache.Claim, ReadOnly: cache.ReadOnly,
			}},
		}}
		ctr.VolumeMounts = []corev1.VolumeMount{{Name: ModelCacheVolume, MountPath: cache.MountPath, ReadOnly: cache.ReadOnly}}
	}

	// Argo's UI offers the workflow arguments when submitting from the
	// template; a step called through templateRef uses the inputs' defaults.
	var args []wfv1.Parameter
	for _, pm := range params {
		args = append(args, wfv1.Parameter{Name: pm.Name, Value: pm.Default, Enum: pm.Enum})
	}

	wt := &wfv1.WorkflowTemplate{
		TypeMeta: metav1.TypeMeta{APIVersion: argoAPIVersion, Kind: "WorkflowTemplate"},
		ObjectMeta: meta(p, t.Namespace, name, map[string]string{
			AnnotationVariant:         variant,
			AnnotationArgoDescription: templateDescription(p, t, variant, locks, cache),
		}),
		Spec: wfv1.WorkflowSpec{
			Entrypoint: StepTemplate,
			Arguments:  wfv1.Arguments{Parameters: args},
			Templates:  []wfv1.Template{tmpl},
		},
	}
	wt.Labels[LabelTemplate] = t.Name
	return wt
}

func templateDescription(p *policy.Policy, t policy.Template, variant string, locks []string, cache *policy.ModelCache) string {
	q := p.Queues[t.Queue]
	var b strings.Builder
	fmt.Fprintf(&b, "GPU step on %s through LocalQueue %s (ClusterQueue %s)", t.Card, q.LocalQueue, q.Name)
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
	case variant == VariantCacheFree:
		b.WriteString("; no model store, for jobs that load no model (--no-hf-cache)")
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
			declare(MainContainer, "{{inputs.parameters."+ParamGPUMemory+"}}"),
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
