package render

import (
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	"github.com/gpupolicy/gpupolicy/internal/policy"
	"github.com/gpupolicy/gpupolicy/render/contract"
)

// generate builds every object of the policy, typed, in a fixed order.
// The policy's locks sized from quota have their sizes already
// (admission.SizeLocks); sizes says how they got them.
func generate(p *policy.Policy, sizes []admission.LockSize) []Object {
	return generateObjects(p, sizes, false)
}

// generateObjects is generate; with identities, the ValidatingAdmissionPolicies
// carry their identity only (kind, name, source), which is all Check reads
// of them: they have no CRD to check, and their CEL, a third of a large
// policy's generate, is the API server's to compile.
func generateObjects(p *policy.Policy, sizes []admission.LockSize, identities bool) []Object {
	var out []Object
	for _, ns := range p.Namespaces() {
		out = append(out, namespace(p, ns))
	}
	for _, c := range p.CardNames() {
		out = append(out, resourceFlavor(p, p.Cards[c]))
	}
	// Cohorts before the ClusterQueues that name them (reconcile's order
	// too); a ClusterQueue whose Cohort is missing is in an implicit one.
	for _, n := range p.CohortNames() {
		out = append(out, cohort(p, p.Cohorts[n]))
	}
	for _, n := range p.QueueNames() {
		q := p.Queues[n]
		out = append(out, clusterQueue(p, q))
		for _, ns := range q.Namespaces {
			out = append(out, localQueue(p, q, ns))
		}
	}
	for _, pr := range p.Ladder() {
		out = append(out, workloadPriorityClass(p, pr))
	}
	locks := locksByNamespace(p)
	for _, ns := range slices.Sorted(maps.Keys(locks)) {
		if len(locks[ns]) > 0 {
			out = append(out, semaphoreConfigMap(p, ns, locks[ns], sizes))
		}
	}
	out = append(out, workflowTemplates(p)...)
	out = append(out, devicePluginConfigMap(p))
	for _, ns := range p.JobNamespaces() {
		out = append(out, limitRange(p, ns))
		out = append(out, testJobConfigMap(p, ns))
	}
	var in *admissionInputs
	if !identities {
		in = newAdmissionInputs(p)
	}
	for _, ns := range p.GPUNamespaces() {
		out = append(out, admissionPolicy(p, ns, in), admissionBinding(p, ns))
	}
	return out
}

// meta is the metadata of every rendered object: its name, namespace, the
// ownership labels, and the given annotations.
func meta(p *policy.Policy, namespace, name string, annotations map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels: map[string]string{
			contract.LabelManagedBy: contract.ManagedBy,
			contract.LabelPolicy:    p.Name,
		},
		Annotations: annotations,
	}
}

// object wraps a typed object with its identity and policy source.
func object(obj runtime.Object, source []string) Object {
	m, err := metaAccessor(obj)
	if err != nil {
		panic(err) // every rendered type has ObjectMeta
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	return Object{
		APIVersion: gvk.GroupVersion().String(),
		Kind:       gvk.Kind,
		Namespace:  m.GetNamespace(),
		Name:       m.GetName(),
		Obj:        obj,
		source:     source,
	}
}

func metaAccessor(obj runtime.Object) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("render: %T has no ObjectMeta", obj)
	}
	return m, nil
}

func namespace(p *policy.Policy, name string) Object {
	ns := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: meta(p, "", name, nil),
	}
	return object(ns, nil)
}

// limitRange gives every container in a job namespace that declares no GPU
// memory the policy's default declaration, so an undeclared job is counted
// at the default, not as free.
func limitRange(p *policy.Policy, ns string) Object {
	def := corev1.ResourceList{corev1.ResourceName(p.DeclarationResource): policy.MiBQuantity(p.DefaultGPUMemoryMiB)}
	lr := &corev1.LimitRange{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "LimitRange"},
		ObjectMeta: meta(p, ns, contract.LimitRangeName, map[string]string{
			contract.AnnotationDescription: fmt.Sprintf("a container that declares no GPU memory (%s) is counted at %s",
				p.DeclarationResource, policy.FormatAmount(policy.GPUMemory, p.DefaultGPUMemoryMiB)),
		}),
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type:           corev1.LimitTypeContainer,
			Default:        def,
			DefaultRequest: def.DeepCopy(),
		}}},
	}
	return object(lr, []string{"defaults", "gpuMemory"})
}

// devicePluginConfigMap renders the NVIDIA device plugin's configs, one key
// per card, each a time-slicing config that splits nvidia.com/gpu into the
// card's shares. A node picks its config with the label
// nvidia.com/device-plugin.config=<card> (or the chart's config.default).
func devicePluginConfigMap(p *policy.Policy) Object {
	data := map[string]string{}
	byShares := map[int64]string{} // cards of equal shares have equal configs
	for _, n := range p.CardNames() {
		c := p.Cards[n]
		if s, ok := byShares[c.Shares]; ok {
			data[n] = s
			continue
		}
		cfg := devicePluginConfig{
			Version: "v1",
			Sharing: dpSharing{TimeSlicing: dpTimeSlicing{
				RenameByDefault:            p.DevicePlugin.RenameByDefault,
				FailRequestsGreaterThanOne: p.DevicePlugin.FailRequestsGreaterThanOne,
				Resources:                  []dpResource{{Name: policy.ResourceShares, Replicas: c.Shares}},
			}},
		}
		b, err := yaml.Marshal(cfg)
		if err != nil {
			panic(err) // plain values cannot fail to encode
		}
		data[n] = string(b)
		byShares[c.Shares] = data[n]
	}
	cm := &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(p, p.DevicePlugin.Namespace, p.DevicePlugin.ConfigMap, map[string]string{
			contract.AnnotationDescription: "NVIDIA device plugin time-slicing, one config per card; a node selects one with the label nvidia.com/device-plugin.config=<card>",
		}),
		Data: data,
	}
	return object(cm, []string{"devicePlugin"})
}

// devicePluginConfig is the part of the NVIDIA k8s-device-plugin config file
// (version v1) that gpupolicy sets: time-slicing of nvidia.com/gpu.
type devicePluginConfig struct {
	Version string    `json:"version"`
	Sharing dpSharing `json:"sharing"`
}

type dpSharing struct {
	TimeSlicing dpTimeSlicing `json:"timeSlicing"`
}

type dpTimeSlicing struct {
	// RenameByDefault advertises the shares as nvidia.com/gpu.shared.
	RenameByDefault bool `json:"renameByDefault"`
	// FailRequestsGreaterThanOne refuses a container that asks more than
	// one share; omitted when false, the plugin's default (the lab's
	// renders stay as they were).
	FailRequestsGreaterThanOne bool         `json:"failRequestsGreaterThanOne,omitempty"`
	Resources                  []dpResource `json:"resources"`
}

type dpResource struct {
	Name     string `json:"name"`
	Replicas int64  `json:"replicas"`
}
