package live

import (
	"encoding/json"
	"io"

	"github.com/gpupolicy/gpupolicy/internal/finding"
	"github.com/gpupolicy/gpupolicy/internal/output"
)

// Formats are the formats drift --live prints (drift's).
var Formats = output.All

// Write prints the report in a format (output.Writer): text, json, yaml
// (the same document) or markdown.
func (r *Report) Write(w io.Writer, f output.Format) error {
	return output.Write(w, f, r, r.Text, r.Markdown)
}

// MarshalJSON is the report's document: git, live, and findings, every
// finding of the report (Findings: the git side's pin-drift, then
// live-drift and counted-at-default) in the one shape every verb reports.
func (r *Report) MarshalJSON() ([]byte, error) {
	type plain Report
	return json.Marshal(struct {
		*plain
		Findings finding.List `json:"findings"`
	}{(*plain)(r), r.Findings()})
}
