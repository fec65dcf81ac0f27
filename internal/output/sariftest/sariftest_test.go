package sariftest

import (
	"strings"
	"testing"
)

// The schema loads, takes a minimal log and refuses what SARIF forbids.
func TestValidate(t *testing.T) {
	valid := `{"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "gpupolicy"}}, "results": [
		{"ruleId": "crd", "level": "error", "message": {"text": "m"},
		 "locations": [{"physicalLocation": {"artifactLocation": {"uri": "policies/lab/queues.cue"}, "region": {"startLine": 3, "startColumn": 2}}}]}]}]}`
	if err := Validate([]byte(valid)); err != nil {
		t.Fatalf("a valid log: %v", err)
	}
	for name, c := range map[string]struct{ log, want string }{
		"version 2.0":             {`{"version": "2.0.0", "runs": []}`, "/version"},
		"no runs":                 {`{"version": "2.1.0"}`, "runs"},
		"no driver name":          {`{"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]}`, "name"},
		"level fatal":             {strings.Replace(valid, `"error"`, `"fatal"`, 1), "/level"},
		"line 0":                  {strings.Replace(valid, `"startLine": 3`, `"startLine": 0`, 1), "/startLine"},
		"unknown result property": {strings.Replace(valid, `"ruleId"`, `"rule_id"`, 1), "rule_id"},
		"message without text":    {strings.Replace(valid, `{"text": "m"}`, `{}`, 1), "/message"},
		"uri that is not a URI":   {strings.Replace(valid, `policies/lab/queues.cue`, `policies lab:\\x`, 1), "/uri"},
		"not JSON":                {`{"version":`, "not JSON"},
	} {
		err := Validate([]byte(c.log))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one naming %s", name, err, c.want)
		}
	}
}
