package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestExplainJSONContract decodes `explain -o json` generically and checks
// the documented shape (README.md, "explain -o json: the contract") and the lab's numbers.
func TestExplainJSONContract(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"explain", "../../policies/lab", "-o", "json"}, &out, &errOut)
	if code != exitFindings {
		t.Fatalf("exit %d, want %d (the lab has error findings); stderr: %s", code, exitFindings, errOut.String())
	}
	var doc struct {
		Policy   string   `json:"policy"`
		OnDemand []string `json:"onDemand"`
		Capacity []struct {
			Template string            `json:"template"`
			Queue    string            `json:"queue"`
			Priority string            `json:"priority"`
			State    map[string]string `json:"state"`
			Admitted *int64            `json:"admitted"`
			Binding  []string          `json:"binding"`
			Lock     *struct {
				Name, Effect string
				Size         int64
			} `json:"lock"`
			Margin     map[string]string `json:"margin"`
			Preemption *struct {
				Admitted int64                                       `json:"admitted"`
				Evicts   []struct{ Workload, Reason, Policy string } `json:"evicts"`
			} `json:"preemption"`
		} `json:"capacity"`
		Findings []struct {
			Rule, Severity, Message, Path string
		} `json:"findings"`
	}
	dec := json.NewDecoder(&out)
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decoding: %v", err)
	}
	// gpu-step-no-cache takes the same locks as gpu-step (none: Kueue alone
	// gates), so it shares gpu-step's rows.
	if doc.Policy != "lab" || len(doc.Capacity) != 8 {
		t.Fatalf("policy %q with %d rows, want lab with 8 (1 template × 4 priorities × 2 states)", doc.Policy, len(doc.Capacity))
	}
	found := 0
	for _, c := range doc.Capacity {
		if c.Admitted == nil || c.Margin == nil || c.Binding == nil || c.State == nil {
			t.Fatalf("row %+v lacks a contract field", c)
		}
		if c.Lock != nil {
			t.Errorf("row %+v has a lock; the lab takes none", c)
		}
		if c.Template != "gpu-step" || c.Priority != "batch" {
			continue
		}
		found++
		switch c.State["qwen2-5-7b"] {
		case "down":
			if *c.Admitted != 4 || len(c.Binding) != 2 || c.Binding[0] != "nvidia.com/gpu" || c.Binding[1] != "memory" {
				t.Errorf("7B down: admitted %d binding %v, want 4 [nvidia.com/gpu memory]", *c.Admitted, c.Binding)
			}
		case "up":
			if *c.Admitted != 0 || c.Margin["gpupolicy.dev/gpu-memory"] != "404Mi" || c.Preemption != nil {
				t.Errorf("7B up: admitted %d margin %v preemption %v, want 0, 404Mi, none", *c.Admitted, c.Margin, c.Preemption)
			}
		default:
			t.Errorf("state %v", c.State)
		}
	}
	if found != 2 {
		t.Errorf("%d batch rows for gpu-step, want 2", found)
	}
	rules := map[string]string{}
	for _, f := range doc.Findings {
		if f.Rule == "" || f.Severity == "" || f.Message == "" || f.Path == "" {
			t.Errorf("finding %+v lacks a field", f)
		}
		if _, ok := rules[f.Rule]; !ok {
			rules[f.Rule] = f.Severity // findings come most severe first
		}
	}
	for rule, sev := range map[string]string{"dead-preemption": "error", "starvation": "warning", "declared-physical": "info", "kueue-alone": "info"} {
		if rules[rule] != sev {
			t.Errorf("rule %s: first severity %q, want %q", rule, rules[rule], sev)
		}
	}
}
