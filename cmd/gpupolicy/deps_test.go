package main

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// The binary links neither client-go's typed clientset nor its discovery
// client: their package init (every built-in API group registered in
// client-go's scheme) cost every run, vet and render included, 4-6 ms of
// CPU before main (issue 17). Cluster code uses internal/kube's dynamic and
// REST clients and its Mapper instead.
func TestNoTypedClientset(t *testing.T) {
	for _, p := range binaryDeps(t) {
		for _, banned := range []string{"k8s.io/client-go/kubernetes", "k8s.io/client-go/discovery", "k8s.io/client-go/restmapper"} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("the binary imports %s (use internal/kube's clients)", p)
			}
		}
	}
}

// goPluginFreeTag is the build tag that leaves kustomize's loader of Go .so
// plugins (sigs.k8s.io/kustomize/api/internal/plugins/loader,
// load_go_plugin.go) out of the binary. krusty imports that loader, and a
// cgo binary that links package plugin exports every symbol dynamically
// and keeps what the linker would drop: make build's binary is 106 MB with
// it, 82 MB without, and maps ~4 MiB more at every start (issue 17).
// internal/environment runs krusty with types.DisabledPluginConfig(), under
// which (*Loader).loadAndConfigurePlugin never reaches loadGoPlugin, so the
// tag changes nothing the binary does.
const goPluginFreeTag = "kustomize_disable_go_plugin_support"

// With the tag the binary links no package plugin (a new import that pulls
// it in another way, or a kustomize release that renames the tag, fails
// here), and every build the project ships or measures passes the tag.
func TestNoGoPluginLoader(t *testing.T) {
	deps := binaryDeps(t, "-tags", goPluginFreeTag)
	if !slices.Contains(deps, "sigs.k8s.io/kustomize/api/krusty") {
		t.Fatalf("go list -deps gave no sigs.k8s.io/kustomize/api/krusty among %d packages: the tag has nothing to leave out any more, drop it", len(deps))
	}
	if slices.Contains(deps, "plugin") {
		t.Errorf("built with -tags %s the binary still links package plugin", goPluginFreeTag)
	}
	for _, c := range []struct{ file, want string }{
		{"../../Makefile", "GO_TAGS      := -tags nvml," + goPluginFreeTag + "\n"},
		{"../../Makefile", "\t$(GO) build $(GO_TAGS) "},
		{"../../action.yml", "go install -tags " + goPluginFreeTag + " "},
		{"../../hack/bench-policy.sh", "go build -tags " + goPluginFreeTag + " "},
		{"../../test/cli/main_test.go", `"-tags", "nvml,` + goPluginFreeTag + `"`},
	} {
		b, err := os.ReadFile(c.file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.want) {
			t.Errorf("%s builds gpupolicy without -tags %s (want a line with %q)", c.file, goPluginFreeTag, c.want)
		}
	}
}

// binaryDeps is `go list -deps` of the gpupolicy binary, built with flags:
// every package it links, the standard library's too.
func binaryDeps(t *testing.T, flags ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append(append([]string{"list"}, flags...), "-deps", ".")...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 100 {
		t.Fatalf("go list -deps gave %d packages, want the binary's hundreds", len(deps))
	}
	return deps
}
