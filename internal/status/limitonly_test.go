package status

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// A pending Job-made Workload whose container states its GPU memory by
// limit only (4,096 MiB) is read as Kueue v0.17 counts it: at the job
// namespace's LimitRange default request, 1,024 MiB
// (kubernetes-sigs/kueue#15020); once Kueue recorded its requests
// (status.resourceRequests), those, whatever the pod set says.
func TestPendingLimitOnlyCountedAsKueue(t *testing.T) {
	for name, tc := range map[string]struct{ recorded, want string }{
		"not yet tried":     {"", "1Gi"},
		"recorded by Kueue": {"2Gi", "2Gi"},
	} {
		recorded := tc.recorded
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, true)
			w.job("b1", "batch", "kueue", t0.Add(-time.Minute), time.Time{})
			wl := &w.o.Workloads[len(w.o.Workloads)-1]
			res := &wl.Spec.PodSets[0].Template.Spec.Containers[0].Resources
			decl := corev1.ResourceName(w.p.DeclarationResource)
			delete(res.Requests, decl)
			res.Limits = corev1.ResourceList{decl: resource.MustParse("4Gi")}
			if recorded != "" {
				rl := res.Requests.DeepCopy()
				rl[decl] = resource.MustParse(recorded)
				wl.Status.ResourceRequests = []kueue.PodSetRequest{{Name: "main", Resources: rl}}
			}
			v := only(t, w.analyze(0), "b1")
			if got := v.Quota.Request[string(decl)]; got != tc.want {
				t.Errorf("request %v: GPU memory %q, want %s (Kueue's count, not the 4Gi limit)", v.Quota.Request, got, tc.want)
			}
			if got := v.Quota.Request["nvidia.com/gpu"]; got != "1" {
				t.Errorf("request %v: shares %q, want 1", v.Quota.Request, got)
			}
		})
	}
}
