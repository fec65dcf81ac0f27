// Command genpolicy writes a synthetic gpupolicy policy of a given size, as
// CUE files in the lab's layout, for benchmarks (hack/bench-policy.sh):
// Q ClusterQueues in C cohorts, K cards, S on-demand and A always-on
// services, T GPU step templates.
//
//	go run ./hack/genpolicy -queues 1000 -cohorts 100 -cards 100 -ondemand 200 -alwayson 200 -templates 100 -out out/bench/q1000
//
// In each cohort the first queue owns eight shares of its card and lends
// half; the others own one share each and may borrow two. The always-on
// services run in the first queue of their cohort, the on-demand ones
// (1 share, 4 GiB, 4,096 MiB declared, a low priority) in the others, one
// per queue in turn.
// Cohorts take cards round-robin; a card's shares are what its queues
// own. The directory must lie inside this module (out/ does), so that the
// policy's import of the schema resolves.
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gpupolicy/gpupolicy/internal/atomicfile"
)

func main() {
	q := flag.Int("queues", 100, "ClusterQueues")
	c := flag.Int("cohorts", 10, "cohorts (queues are split evenly)")
	k := flag.Int("cards", 10, "cards (cohorts take them round-robin)")
	s := flag.Int("ondemand", 20, "on-demand services (cohorts take them round-robin)")
	a := flag.Int("alwayson", 20, "always-on services (cohorts take them round-robin)")
	t := flag.Int("templates", 10, "GPU step templates (spread over the queues)")
	out := flag.String("out", "out/bench/policy", "directory to write (replaced; refused when it holds anything genpolicy did not write)")
	flag.Parse()
	if *q < 1 || *c < 1 || *c > *q || *k < 1 || *t < 1 || *s < 0 || *a < 0 {
		fmt.Fprintln(os.Stderr, "genpolicy: need queues ≥ cohorts ≥ 1, cards ≥ 1, templates ≥ 1")
		os.Exit(2)
	}
	if err := write(*out, gen(*q, *c, *k, *s, *a, *t)); err != nil {
		fmt.Fprintln(os.Stderr, "genpolicy:", err)
		os.Exit(2)
	}
}

// gen returns the files: name → content.
func gen(nq, nc, nk, ns, na, nt int) map[string]string {
	qname := func(i int) string { return fmt.Sprintf("q-%04d", i) }
	cohortOf := func(i int) int { return i * nc / nq } // contiguous, even
	first := make([]int, nc)                           // first queue of each cohort
	size := make([]int, nc)
	for i := nq - 1; i >= 0; i-- {
		first[cohortOf(i)] = i
		size[cohortOf(i)]++
	}
	cardOf := func(co int) string { return fmt.Sprintf("card-%03d", co%nk) }
	shares := map[string]int{}
	for co := 0; co < nc; co++ {
		shares[cardOf(co)] += 8 + (size[co] - 1)
	}

	var b strings.Builder
	fmt.Fprintf(&b, header+"package bench\n\nimport \"github.com/gpupolicy/gpupolicy/schema\"\n\nschema.#Policy\n\nname: %q\n\ndefaults: gpuMemory: 1024\n\n", fmt.Sprintf("bench-q%d-c%d-k%d-s%d", nq, nc, nk, ns))
	for i := 0; i < nk; i++ {
		card := fmt.Sprintf("card-%03d", i)
		n := max(shares[card], 1)
		fmt.Fprintf(&b, "cards: %q: {\n\tmodel: \"synthetic 24 GB\"\n\tmemoryMiB: %d\n\tshares: %d\n\tnodeLabels: \"nvidia.com/gpu.product\": %q\n}\n",
			card, 24576*((n+16)/17), n, card+"-SHARED")
	}
	policy := b.String()

	b.Reset()
	b.WriteString(header + "package bench\n\npriorities: {\n")
	b.WriteString("\t\"always-on\": {value: 1000, description: \"always-on models\"}\n")
	b.WriteString("\ttraining: {value: 100, default: true, description: \"training\"}\n")
	b.WriteString("\t\"on-demand-llm\": {value: 50, description: \"on-demand language models\"}\n")
	b.WriteString("\tbatch: {value: 10, description: \"batch experiments\"}\n}\n")
	b.WriteString("\nlocks: main: {size: 4, description: \"GPU jobs running at once\"}\n")
	prios := b.String()

	b.Reset()
	b.WriteString(header + "package bench\n\nqueues: {\n")
	for i := 0; i < nq; i++ {
		co := cohortOf(i)
		fmt.Fprintf(&b, "\t%q: {\n\t\tcohort: \"cohort-%03d\"\n\t\tnamespaces: [\"ns-%s\"]\n\t\tflavors: %q: {\n", qname(i), co, qname(i), cardOf(co))
		if i == first[co] {
			b.WriteString("\t\t\tshares: {nominalQuota: 8, lendingLimit: 4}\n\t\t\thostMemory: {nominalQuota: \"32Gi\", lendingLimit: \"16Gi\"}\n\t\t\tgpuMemory: {nominalQuota: 16384, lendingLimit: 8192}\n\t\t}\n")
			b.WriteString("\t\tpreemption: {withinClusterQueue: \"LowerPriority\", reclaimWithinCohort: \"LowerPriority\"}\n")
		} else {
			b.WriteString("\t\t\tshares: {nominalQuota: 1, borrowingLimit: 2}\n\t\t\thostMemory: {nominalQuota: \"4Gi\", borrowingLimit: \"8Gi\"}\n\t\t\tgpuMemory: {nominalQuota: 1024, borrowingLimit: 4096}\n\t\t}\n")
			b.WriteString("\t\tpreemption: {withinClusterQueue: \"LowerOrNewerEqualPriority\", reclaimWithinCohort: \"Any\"}\n")
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	queues := b.String()

	b.Reset()
	b.WriteString(header + "package bench\n\nservices: {\n")
	for i := 0; i < na; i++ {
		co := i % nc
		qi := first[co]
		fmt.Fprintf(&b, "\t\"svc-%03d\": {mode: \"always-on\", description: \"always-on model\", namespace: \"ns-%s\", queue: %q, priority: \"always-on\", card: %q, shares: 1, hostMemory: \"2Gi\", gpuMemory: 1024}\n",
			i, qname(qi), qname(qi), cardOf(co))
	}
	for i := 0; i < ns; i++ {
		co := i % nc
		qi := first[co]
		if size[co] > 1 {
			qi += 1 + (i/nc)%(size[co]-1) // spread over the cohort's other queues
		}
		fmt.Fprintf(&b, "\t\"llm-%03d\": {mode: \"on-demand\", description: \"on-demand model\", idleScaleDownSeconds: 3600, namespace: \"ns-%s\", queue: %q, priority: \"on-demand-llm\", card: %q, shares: 1, hostMemory: \"4Gi\", gpuMemory: 4096}\n",
			i, qname(qi), qname(qi), cardOf(co))
	}
	b.WriteString("}\n")
	services := b.String()

	b.Reset()
	b.WriteString(header + "package bench\n\ntemplates: {\n")
	for i := 0; i < nt; i++ {
		qi := i * nq / nt
		fmt.Fprintf(&b, "\t\"step-%03d\": {namespace: \"ns-%s\", queue: %q, card: %q, locks: [\"main\"], image: \"registry.example/gpu-job:1\", command: [\"python3\", \"/opt/job/run.py\"], shares: 1, hostMemory: \"2Gi\", gpuMemory: 1024, timeLimitSeconds: 3600}\n",
			i, qname(qi), qname(qi), cardOf(cohortOf(qi)))
	}
	b.WriteString("}\n")
	return map[string]string{"policy.cue": policy, "priorities.cue": prios, "queues.cue": queues, "services.cue": services, "templates.cue": b.String()}
}

// header starts every file genpolicy writes: write replaces a directory
// only when every file in it starts so.
const header = "// Code generated by hack/genpolicy. DO NOT EDIT.\n\n"

// write replaces dir with the files, as render replaces its output
// (atomicfile.ReplaceDirChecked: all or nothing), refusing a dir that holds
// anything genpolicy did not write.
func write(dir string, files map[string]string) error {
	b := make(map[string][]byte, len(files))
	for name, content := range files {
		b[name] = []byte(content)
	}
	_, err := atomicfile.ReplaceDirChecked(dir, b, len(header), func(name string, typ fs.FileMode, head []byte) error {
		// Its files, and those of genpolicy before it had a header.
		if !typ.IsRegular() || string(head) != header && !strings.HasPrefix(string(head), "package bench\n") {
			return fmt.Errorf("refusing to replace %s: %s was not written by genpolicy (move it, or choose another -out)", dir, filepath.Join(dir, name))
		}
		return nil
	})
	return err
}
