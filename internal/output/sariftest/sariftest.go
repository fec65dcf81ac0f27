// Package sariftest validates SARIF logs against the official SARIF 2.1.0
// JSON schema, for tests (of internal/output and of the verbs that write
// -o sarif). It is imported by tests only; the schema stays out of the
// gpupolicy binary.
//
// sarif-schema-2.1.0.json is the OASIS SARIF Version 2.1.0 schema with
// Errata 01 (OASIS Standard, its id
// https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json,
// JSON Schema draft-04), copied byte for byte from the Go module
// github.com/owenrumney/go-sarif/v3@v3.3.1, pkg/report/v210/sarif/schema.go
// (the text of its schema constant); its body is the oasis-tcs/sarif-spec
// repository's Schemata/sarif-schema-2.1.0.json, which differs only in
// naming a later JSON Schema draft. sha256
// c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e.
package sariftest

import (
	"bytes"
	_ "embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

//go:embed sarif-schema-2.1.0.json
var schemaJSON []byte

// SchemaID is the schema's id.
const SchemaID = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

var compiled = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, fmt.Errorf("sariftest: the vendored schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	// Formats (uri, uri-reference, date-time) are checked, not only noted.
	c.AssertFormat()
	if err := c.AddResource(SchemaID, doc); err != nil {
		return nil, err
	}
	return c.Compile(SchemaID)
})

// Validate checks a SARIF log (JSON) against the SARIF 2.1.0 schema. The
// error lists every violation with its location in the log.
func Validate(log []byte) error {
	s, err := compiled()
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(log))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("not a valid SARIF 2.1.0 log: %w", err)
	}
	return nil
}
