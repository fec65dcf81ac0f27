// Package contract is render's output contract: the labels, names,
// parameters and API resources of what gpupolicy renders. Render writes
// them; drift, live drift, verify, reconcile and the cluster tests read them
// back from here, never retyped. It depends on nothing of gpupolicy, so any
// package may import it.
package contract

import "k8s.io/apimachinery/pkg/runtime/schema"

// Labels and annotations on what gpupolicy renders.
const (
	// LabelManagedBy and LabelPolicy mark every rendered object; reconcile
	// prunes only objects that carry both.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "gpupolicy"
	LabelPolicy    = "gpupolicy.dev/policy"
	// LabelEnvironment is the label every environment overlay
	// (environments/ENV/kustomization.yaml) puts on what it deploys; with
	// LabelManagedBy it selects what reconcile owns in an environment.
	LabelEnvironment = "gpupolicy.dev/environment"

	// LabelTemplate groups a template's variants (cache and cache-free)
	// under the policy's template name.
	LabelTemplate = "gpupolicy.dev/template"
	// AnnotationVariant is VariantCache or VariantCacheFree on a
	// WorkflowTemplate.
	AnnotationVariant = "gpupolicy.dev/template-variant"
	// AnnotationDescription says in one line what an object is for.
	AnnotationDescription = "gpupolicy.dev/description"
	// AnnotationArgoDescription is the description Argo's UI shows.
	AnnotationArgoDescription = "workflows.argoproj.io/description"

	// Kueue's labels on a pod: its LocalQueue and WorkloadPriorityClass.
	LabelKueueQueue    = "kueue.x-k8s.io/queue-name"
	LabelKueuePriority = "kueue.x-k8s.io/priority-class"
	// LabelArgoWorkflow is Argo's label on a step's pod: its Workflow.
	LabelArgoWorkflow = "workflows.argoproj.io/workflow"
)

// Template variants (AnnotationVariant): a template, and its cache-free
// variant without the model-store mount.
const (
	VariantCache     = "cache"
	VariantCacheFree = "cache-free"
)

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
	// ParamGPUMemory is the step's GPU-memory declaration in MiB, written
	// "NMi" (e.g. "12452Mi").
	ParamGPUMemory = "gpu-memory"
	// ModelCacheVolume is the volume of the shared model store.
	ModelCacheVolume = "model-cache"
)

// DefaultDeclarationResource is the extended resource that carries a pod's
// GPU-memory declaration (MiB) when the policy names none (the schema's
// default for declarationResource).
const DefaultDeclarationResource = "gpupolicy.dev/gpu-memory"

// LimitRangeName names the LimitRange in each job namespace that gives an
// undeclared container the default declaration.
const LimitRangeName = "gpu-memory-default"

// API versions render writes; the objects Kueue and Argo make from the
// rendered ones (Workloads, Workflows) are read at the same versions.
const (
	KueueAPIVersion = "kueue.x-k8s.io/v1beta2"
	ArgoAPIVersion  = "argoproj.io/v1alpha1"
)

var (
	kueueGV = schema.GroupVersion{Group: "kueue.x-k8s.io", Version: "v1beta2"}
	argoGV  = schema.GroupVersion{Group: "argoproj.io", Version: "v1alpha1"}
)

// Resources of the objects render writes, and of those made from them.
var (
	GVRResourceFlavor        = kueueGV.WithResource("resourceflavors")
	GVRClusterQueue          = kueueGV.WithResource("clusterqueues")
	GVRLocalQueue            = kueueGV.WithResource("localqueues")
	GVRWorkloadPriorityClass = kueueGV.WithResource("workloadpriorityclasses")
	GVRWorkload              = kueueGV.WithResource("workloads")
	GVRWorkflowTemplate      = argoGV.WithResource("workflowtemplates")
	GVRWorkflow              = argoGV.WithResource("workflows")
)
