package admission_test

import (
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/admission"
	. "github.com/gpupolicy/gpupolicy/internal/admission/admissiontest"
)

// kueue-alone for a template no reachable state has room for says so,
// instead of "at most 0 at once, while " with no state.
func TestKueueAloneWhenNothingFits(t *testing.T) {
	cases := map[string]struct {
		p         *PolicyWrapper
		says, not []string
	}{
		"a job larger than its queue": {
			p: ladder3("too-big").
				Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2).HostMemory(GiB(16)).GPUMemory(16384))).
				Template(MakeTemplate("t").Queue("q").Card("c").Request(4, GiB(1), 1024)),
			says: []string{"(none: no reachable service state leaves room for one of its jobs (4 shares, 1,024 MiB host memory, 1,024 MiB GPU memory), at any priority, and no preemption makes room (see starvation))"},
		},
		"room only by evicting a service": {
			// The always-on service (low) holds both shares; a mid or
			// high job evicts it (withinClusterQueue LowerPriority) and two
			// run.
			p: ladder3("evict-for-room").
				Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2).HostMemory(GiB(16)).GPUMemory(16384)).Preemption("LowerPriority", "Never")).
				Service(MakeService("s").Queue("q").Card("c").Priority("low").Request(2, GiB(1), 1024)).
				Template(MakeTemplate("t").Queue("q").Card("c").Request(1, GiB(1), 1024)),
			says: []string{"(none without preemption: no reachable service state leaves room for one of its jobs; only by evicting others do up to 2 run, with every service up (all are always-on), at priority high)"},
		},
		"room in some state": {
			p: ladder3("fits").
				Queue(MakeQueue("q").Flavor(MakeFlavor("c").Shares(2).HostMemory(GiB(16)).GPUMemory(16384))).
				Template(MakeTemplate("t").Queue("q").Card("c").Request(1, GiB(1), 1024)),
			says: []string{"(at most 2 at once, with every service up (all are always-on))"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r, err := admission.Explain(tc.p.Obj())
			if err != nil {
				t.Fatal(err)
			}
			var msg string
			for _, f := range r.Findings {
				if f.Rule == "kueue-alone" {
					msg = f.Message
				}
			}
			if msg == "" {
				t.Fatal("no kueue-alone finding")
			}
			for _, w := range tc.says {
				if !strings.Contains(msg, w) {
					t.Errorf("kueue-alone lacks %q:\n%s", w, msg)
				}
			}
			if strings.Contains(msg, "at most 0") || strings.Contains(msg, "while )") {
				t.Errorf("kueue-alone says nothing true: %s", msg)
			}
		})
	}
}
