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
	GVRCohort                = kueueGV.WithResource("cohorts")
	GVRLocalQueue            = kueueGV.WithResource("localqueues")
	GVRWorkloadPriorityClass = kueueGV.WithResource("workloadpriorityclasses")
	GVRWorkload              = kueueGV.WithResource("workloads")
	GVRWorkflowTemplate      = argoGV.WithResource("workflowtemplates")
	GVRWorkflow              = argoGV.WithResource("workflows")
)

// The GitOps engine objects render --env writes beside an environment
// (environments/ENV/gitops), and that drift --live reads back: Flux's
// GitRepository and Kustomization, Argo CD's Application.
const (
	FluxSourceAPIVersion    = "source.toolkit.fluxcd.io/v1"
	FluxKustomizeAPIVersion = "kustomize.toolkit.fluxcd.io/v1"
	ArgoCDAPIVersion        = "argoproj.io/v1alpha1"
)

// Resources of the GitOps engine objects.
var (
	GVRFluxGitRepository = schema.GroupVersionResource{Group: "source.toolkit.fluxcd.io", Version: "v1", Resource: "gitrepositories"}
	GVRFluxKustomization = schema.GroupVersionResource{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Resource: "kustomizations"}
	GVRArgoCDApplication = argoGV.WithResource("applications")
)

// The admission rules the API server enforces in every namespace where the
// policy's GPU workloads run (a ValidatingAdmissionPolicy and its binding
// per namespace), and that drift --live reports for what slipped in before
// them. Their messages and findings name these IDs.
const (
	// RuleGPUOutsideKueue: a pod asking for a share or declaring GPU
	// memory without a LocalQueue (label LabelKueueQueue).
	RuleGPUOutsideKueue = "gpu-outside-kueue"
	// RulePriorityNotAllowed: a workload naming a priority its namespace
	// may not use.
	RulePriorityNotAllowed = "priority-not-allowed"
	// RuleQueueNotAllowed: a workload naming a LocalQueue its namespace
	// may not use.
	RuleQueueNotAllowed = "queue-not-allowed"
	// RuleDeclarationOverQueue: a pod (or a Job's pod template) declaring
	// more GPU memory than its LocalQueue's ClusterQueue could ever admit
	// (admission.DeclarationCeiling): Kueue would hold it forever.
	RuleDeclarationOverQueue = "declaration-over-queue"
)

// AdmissionPolicyPrefix starts the name of each namespace's
// ValidatingAdmissionPolicy and binding: <prefix><namespace>.
const AdmissionPolicyPrefix = "gpupolicy-"

// APIVersion and resources of the admission objects (core Kubernetes).
const AdmissionAPIVersion = "admissionregistration.k8s.io/v1"

var (
	admissionGV                         = schema.GroupVersion{Group: "admissionregistration.k8s.io", Version: "v1"}
	GVRValidatingAdmissionPolicy        = admissionGV.WithResource("validatingadmissionpolicies")
	GVRValidatingAdmissionPolicyBinding = admissionGV.WithResource("validatingadmissionpolicybindings")
)

// RenderedKinds are every kind render writes into an environment's render,
// whether or not a given policy has one (a policy without Cohorts renders
// none). reconcile prunes, and drift --live reports as extra, the owned
// objects of each of these kinds that the render lacks, so that a policy
// dropping the last object of a kind leaves none behind. The render tests
// check that every kind a policy renders is listed here.
var RenderedKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "LimitRange"},
	kueueGV.WithKind("ResourceFlavor"),
	kueueGV.WithKind("Cohort"),
	kueueGV.WithKind("ClusterQueue"),
	kueueGV.WithKind("LocalQueue"),
	kueueGV.WithKind("WorkloadPriorityClass"),
	argoGV.WithKind("WorkflowTemplate"),
	admissionGV.WithKind("ValidatingAdmissionPolicy"),
	admissionGV.WithKind("ValidatingAdmissionPolicyBinding"),
}
