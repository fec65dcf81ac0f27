package admission_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/gpupolicy/gpupolicy/internal/admission"
)

const decl = corev1.ResourceName("gpupolicy.dev/gpu-memory")

func container(req, lim string) corev1.Container {
	c := corev1.Container{Name: "main", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}}
	if req != "" {
		c.Resources.Requests[decl] = resource.MustParse(req)
	}
	if lim != "" {
		c.Resources.Limits[decl] = resource.MustParse(lim)
	}
	return c
}

func podSet(count int32, cs ...corev1.Container) kueue.PodSet {
	return kueue.PodSet{Name: "main", Count: count, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: cs}}}
}

// labRange is the LimitRange render writes in a job namespace: default
// and defaultRequest 1,024 MiB of the declaration.
func labRange() []corev1.LimitRange {
	def := corev1.ResourceList{decl: resource.MustParse("1024Mi")}
	return []corev1.LimitRange{{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Default: def, DefaultRequest: def},
	}}}}
}

func TestCountPodSetsAsKueue(t *testing.T) {
	lab := admission.ContainerDefaults(labRange())
	none := admission.ContainerDefaults(nil)
	sidecar := container("512Mi", "")
	always := corev1.ContainerRestartPolicyAlways
	sidecar.RestartPolicy = &always
	cases := []struct {
		name                     string
		ps                       []kueue.PodSet
		lr                       admission.LimitRangeDefaults
		counted, stated          string
		byReq, byLimit, unstated int
		limitOnly, limitCounted  string
	}{
		// kubernetes-sigs/kueue#15020: the LimitRange's defaultRequest
		// comes before the limit.
		{"limit only, LimitRange default", []kueue.PodSet{podSet(1, container("", "4Gi"))}, lab, "1Gi", "4Gi", 0, 1, 0, "4Gi", "1Gi"},
		{"limit only, no LimitRange", []kueue.PodSet{podSet(1, container("", "4Gi"))}, none, "4Gi", "4Gi", 0, 1, 0, "4Gi", "4Gi"},
		{"request", []kueue.PodSet{podSet(1, container("12452Mi", "12452Mi"))}, lab, "12452Mi", "12452Mi", 1, 0, 0, "0", "0"},
		{"nothing stated, LimitRange default", []kueue.PodSet{podSet(1, container("", ""))}, lab, "1Gi", "0", 0, 0, 1, "0", "0"},
		{"nothing stated, no LimitRange", []kueue.PodSet{podSet(1, container("", ""))}, none, "0", "0", 0, 0, 1, "0", "0"},
		{"two pods, limit only", []kueue.PodSet{podSet(2, container("", "3Gi"))}, lab, "2Gi", "6Gi", 0, 1, 0, "6Gi", "2Gi"},
		{"a request and a limit-only container", []kueue.PodSet{podSet(1, container("2Gi", ""), container("", "4Gi"))}, lab, "3Gi", "6Gi", 1, 1, 0, "4Gi", "1Gi"},
		// An init container larger than the containers is the pod's peak;
		// a sidecar adds to both.
		{"init container peak", []kueue.PodSet{{Name: "main", Count: 1, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{sidecar, container("3Gi", "")},
			Containers:     []corev1.Container{container("1Gi", "")}}}}}, none, "3584Mi", "3584Mi", 1, 0, 0, "0", "0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := admission.CountPodSets(tc.ps, decl, tc.lr)
			eq := func(what string, got resource.Quantity, want string) {
				if got.Cmp(resource.MustParse(want)) != 0 {
					t.Errorf("%s = %s, want %s", what, got.String(), want)
				}
			}
			eq("Counted", st.Counted, tc.counted)
			eq("Stated", st.Stated, tc.stated)
			eq("LimitOnly", st.LimitOnly, tc.limitOnly)
			eq("LimitOnlyCounted", st.LimitOnlyCounted, tc.limitCounted)
			if st.ByRequest != tc.byReq || st.ByLimitOnly != tc.byLimit || st.Unstated != tc.unstated {
				t.Errorf("by request %d, limit only %d, unstated %d; want %d, %d, %d", st.ByRequest, st.ByLimitOnly, st.Unstated, tc.byReq, tc.byLimit, tc.unstated)
			}
		})
	}
}

// TestContainerDefaultsFirstWins: with two LimitRanges the first one's
// defaultRequest wins (limitrange.Summarize keeps the first).
func TestContainerDefaultsFirstWins(t *testing.T) {
	second := corev1.LimitRange{Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, DefaultRequest: corev1.ResourceList{decl: resource.MustParse("8Gi")}},
		{Type: corev1.LimitTypePod, DefaultRequest: corev1.ResourceList{"cpu": resource.MustParse("1")}},
	}}}
	d := admission.ContainerDefaults(append(labRange(), second))
	if q := d.DefaultRequest[decl]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("defaultRequest %s, want the first range's 1Gi", q.String())
	}
	if _, ok := d.DefaultRequest["cpu"]; ok {
		t.Error("a Pod-type item's default counted as a container default")
	}
}
