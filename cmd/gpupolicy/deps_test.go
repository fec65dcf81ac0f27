package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The binary links neither client-go's typed clientset nor its discovery
// client: their package init (every built-in API group registered in
// client-go's scheme) cost every run, vet and render included, 4-6 ms of
// CPU before main (issue 17). Cluster code uses internal/kube's dynamic and
// REST clients and its Mapper instead.
func TestNoTypedClientset(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps gave %d packages, want the binary's hundreds", len(deps))
	}
	for _, p := range deps {
		for _, banned := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/discovery", "k8s.io/client-go/restmapper"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("the binary imports %s (use internal/kube's clients)", p)
			}
		}
	}
}
