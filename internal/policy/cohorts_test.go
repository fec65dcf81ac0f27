package policy

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

func TestLoadDepartmentCohorts(t *testing.T) {
	p, err := Load("../../policies/department")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.CohortNames(); !slices.Equal(got, []string{"department", "language", "vision"}) {
		t.Fatalf("cohorts %v", got)
	}
	dep := p.Cohorts["department"].Flavors["rtx-5060-ti"]
	if dep.Shares.Nominal != 2 || dep.HostMemory.Nominal != 8*1024 || dep.GPUMemory.Nominal != 4096 || dep.Shares.BorrowingLimit != nil {
		t.Errorf("department quotas = %+v", dep)
	}
	vision := p.Cohorts["vision"]
	if bl := vision.Flavors["rtx-5060-ti"].Shares.BorrowingLimit; vision.Parent != "department" || bl == nil || *bl != 2 {
		t.Errorf("vision = %+v, want parent department and a borrowingLimit of 2 shares", vision)
	}
	if lang := p.Cohorts["language"]; lang.Parent != "department" || len(lang.Flavors) != 0 {
		t.Errorf("language = %+v", lang)
	}
	if got := p.CohortPath("vision"); !slices.Equal(got, []string{"vision", "department"}) {
		t.Errorf("CohortPath(vision) = %v", got)
	}
	if a, b := p.CohortTree("vision-train"), p.CohortTree("language-serve"); a != "department" || b != "department" {
		t.Errorf("CohortTree = %q, %q; want department for both", a, b)
	}
}

// TestCohortRules loads the department policy with one file more and
// checks the finding each cohort rule gives, at the field that breaks it.
func TestCohortRules(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "..", "policies", "department", "policy.cue"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		extra string
		rule  finding.Rule
		pos   string // file:line:col of the finding
		msg   string
	}{
		"unknown parent": {
			extra: "cohorts: robotics: parent: \"departmnet\"\n",
			rule:  RuleCohortParent, pos: "x.cue:2:28",
			msg: `cohort "robotics" names parent "departmnet", which the policy does not declare: did you mean department? (cohorts: department, language, robotics, vision); if "departmnet" is meant, declare it, even empty`,
		},
		"unknown parent, no declared one close": {
			extra: "cohorts: robotics: parent: \"lab\"\n",
			rule:  RuleCohortParent, pos: "x.cue:2:28",
			msg: `cohort "robotics" names parent "lab", which the policy does not declare (cohorts: department, language, robotics, vision); declare it, even empty (cohorts: "lab": {})`,
		},
		"cycle of parents": {
			extra: "cohorts: department: parent: \"language\"\n",
			rule:  RuleCohortCycle, pos: "x.cue:2:30",
			msg: "cohorts department, language form a cycle of parents (department → language → department); Kueue admits nothing in their ClusterQueues (language-serve, vision-train)",
		},
		"its own parent": {
			extra: "cohorts: department: parent: \"department\"\n",
			rule:  RuleCohortCycle, pos: "x.cue:2:30",
			msg: "cohort department names itself as its parent; Kueue admits nothing in its ClusterQueues (language-serve, vision-train) while it does",
		},
		"limit on a root": {
			extra: "cohorts: department: flavors: \"rtx-5060-ti\": shares: borrowingLimit: 1\n",
			rule:  RuleLimitWithoutParent, pos: "x.cue:2:70",
			msg: `cohort "department" sets a shares borrowingLimit but has no parent to borrow from`,
		},
		"a cohort's card the policy lacks": {
			extra: "cohorts: vision: flavors: a100: {shares: nominalQuota: 1, hostMemory: nominalQuota: \"0\", gpuMemory: nominalQuota: 0}\n",
			rule:  RuleUnknownReference, pos: "x.cue:2:27",
			msg: `cohorts.vision.flavors.a100 names card "a100"`,
		},
		"a cohort's quota counts against the card": {
			extra: "cohorts: language: flavors: \"rtx-5060-ti\": {shares: nominalQuota: 1, hostMemory: nominalQuota: \"0\", gpuMemory: nominalQuota: 0}\n",
			rule:  RuleQuotaOverCard, pos: "policy.cue:65:30", // vision-train's 5, the largest
			msg: "the nominal quotas of the queues and Cohorts on card \"rtx-5060-ti\" add up to 9 shares " +
				"(language-serve 1, vision-train 5, cohort department 2, cohort language 1), but the card has 8",
		},
		"a cohort's quota is the largest": {
			extra: "cohorts: language: flavors: \"rtx-5060-ti\": {shares: nominalQuota: 6, hostMemory: nominalQuota: \"0\", gpuMemory: nominalQuota: 0}\n",
			rule:  RuleQuotaOverCard, pos: "x.cue:2:67",
			msg: "the nominal quotas of the queues and Cohorts on card \"rtx-5060-ti\" add up to 14 shares " +
				"(language-serve 1, vision-train 5, cohort department 2, cohort language 6), but the card has 8",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{"policy.cue": base, "x.cue": []byte("package department\n" + tc.extra)}
			_, err := LoadFiles(files, func(n string) string { return n })
			var ds finding.List
			if !errors.As(err, &ds) {
				t.Fatalf("load: %v, want findings", err)
			}
			for _, f := range ds {
				if f.Rule == tc.rule.ID && strings.Contains(f.Message, tc.msg) && (tc.pos == "" || f.Pos == tc.pos) {
					return
				}
			}
			t.Errorf("no %s finding at %s with %q; got:\n%v", tc.rule.ID, tc.pos, tc.msg, ds)
		})
	}
}

// TestCohortUndeclared misspells vision-train's cohort in the department
// policy: the policy stays valid (Kueue makes "visoin" an implicit root
// cohort) and Warnings says so at the queue's cohort field, with the
// declared Cohort it likely meant.
func TestCohortUndeclared(t *testing.T) {
	base, err := os.ReadFile(filepath.Join("..", "..", "policies", "department", "policy.cue"))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]struct {
		from, to string
		want     []string // messages, in order; none for a clean policy
		pos      string
	}{
		"misspelt": {`cohort:     "vision"`, `cohort:     "visoin"`, []string{
			`queue vision-train names cohort "visoin", which the policy does not declare: did you mean vision? (cohorts: department, language, vision); ` +
				`Kueue makes it an implicit root cohort, with no parent and no quota, shared only by vision-train. If it is meant, declare it (cohorts: "visoin": {})`,
		}, "policy.cue:62:15"},
		"nothing close": {`cohort:     "language"`, `cohort:     "vision-lab"`, []string{
			`queue language-serve names cohort "vision-lab", which the policy does not declare (cohorts: department, language, vision); ` +
				`Kueue makes it an implicit root cohort, with no parent and no quota, shared only by language-serve.`,
		}, "policy.cue:77:15"},
		"declared": {"", "", nil, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := strings.Replace(string(base), tc.from, tc.to, 1)
			if src == string(base) && tc.from != "" {
				t.Fatalf("%q is not in the department policy", tc.from)
			}
			p, err := LoadFiles(map[string][]byte{"policy.cue": []byte(src)}, func(n string) string { return n })
			if err != nil {
				t.Fatalf("load: %v (an undeclared cohort is valid)", err)
			}
			var got []finding.Finding
			for _, f := range p.Warnings() {
				if f.Rule == RuleCohortUndeclared.ID {
					got = append(got, f)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("cohort-undeclared warnings %v, want %d", got, len(tc.want))
			}
			for i, f := range got {
				if f.Severity != finding.Warning || f.Pos != tc.pos || !strings.HasPrefix(f.Message, tc.want[i]) {
					t.Errorf("got %s %s %q\nwant warning %s %q", f.Severity, f.Pos, f.Message, tc.pos, tc.want[i])
				}
			}
		})
	}
}
