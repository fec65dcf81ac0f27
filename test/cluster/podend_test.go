package cluster_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpupolicy/gpupolicy/internal/cluster"
	"github.com/gpupolicy/gpupolicy/test/clustertest"
)

// TestPodEndsAsKubelet: a timed pod on the simulated node ends as a
// kubelet leaves a pod whose containers exited under restartPolicy Never —
// what verify --faults relies on to simulate the test job's own crash.
// With gpupolicy.dev/exit-code 1 its main container is terminated with
// exit code 1 and reason Error (an Argo wait sidecar with 0, Completed),
// each container's startedAt is when it started running (not its end),
// Ready and ContainersReady are False with reason PodCompleted, and the
// phase is Failed; without it, exit code 0, Completed, Succeeded.
func TestPodEndsAsKubelet(t *testing.T) {
	c := labCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs := c.Clientset()
	ns := "pod-end"
	if err := c.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for name, code := range map[string]string{"crashes": "1", "succeeds": ""} {
		ann := map[string]string{cluster.AnnotationRunSeconds: "3"}
		if code != "" {
			ann[cluster.AnnotationExitCode] = code
		}
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: ann},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeName:      c.NodeName(),
				Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
				Containers:    []corev1.Container{{Name: "main", Image: "lab.local/job:latest"}, {Name: "wait", Image: "lab.local/argoexec:latest"}},
			},
		}
		if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]struct {
		phase  corev1.PodPhase
		code   int32
		reason string
	}{
		"crashes":  {corev1.PodFailed, 1, "Error"},
		"succeeds": {corev1.PodSucceeded, 0, "Completed"},
	} {
		var pod *corev1.Pod
		clustertest.WaitFor(t, ctx, "pod "+name+" ended", func(ctx context.Context) (bool, error) {
			var err error
			pod, err = cs.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed), err
		})
		if pod.Status.Phase != want.phase {
			t.Errorf("%s: phase %s, want %s", name, pod.Status.Phase, want.phase)
		}
		for _, cst := range pod.Status.ContainerStatuses {
			term := cst.State.Terminated
			if term == nil {
				t.Errorf("%s/%s: not terminated: %+v", name, cst.Name, cst.State)
				continue
			}
			code, reason := want.code, want.reason
			if cst.Name == "wait" {
				code, reason = 0, "Completed"
			}
			if term.ExitCode != code || term.Reason != reason {
				t.Errorf("%s/%s: exit code %d reason %q, want %d %q", name, cst.Name, term.ExitCode, term.Reason, code, reason)
			}
			if ran := term.FinishedAt.Sub(term.StartedAt.Time); ran < 2*time.Second || ran > 5*time.Second {
				t.Errorf("%s/%s: started %s, finished %s: want its 3 s run between them", name, cst.Name, term.StartedAt, term.FinishedAt)
			}
			if cst.Ready || (cst.Started != nil && *cst.Started) {
				t.Errorf("%s/%s: ready %v started %v after its end", name, cst.Name, cst.Ready, cst.Started)
			}
		}
		for _, typ := range []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady} {
			found := false
			for _, cond := range pod.Status.Conditions {
				if cond.Type == typ {
					found = true
					if cond.Status != corev1.ConditionFalse || cond.Reason != "PodCompleted" {
						t.Errorf("%s: %s %s (%s), want False (PodCompleted)", name, typ, cond.Status, cond.Reason)
					}
				}
			}
			if !found {
				t.Errorf("%s: no %s condition", name, typ)
			}
		}
	}
}
