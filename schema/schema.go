// Package schema embeds the CUE schema that every gpupolicy policy is
// checked against, so the gpupolicy binary works from any directory.
//
// The same files are the repository's CUE package
// "github.com/gpupolicy/gpupolicy/schema", so the stock `cue vet` checks a
// policy in this repository against exactly what the binary embeds.
package schema

import "embed"

// Files holds the schema's .cue files at their base names.
//
//go:embed *.cue
var Files embed.FS

// ModulePath is the CUE module path of the repository root; policies import
// ModulePath + "/schema".
const ModulePath = "github.com/gpupolicy/gpupolicy@v0"

// ModuleFile is the content of cue.mod/module.cue at the repository root.
// A test keeps the two identical.
const ModuleFile = `module: "github.com/gpupolicy/gpupolicy@v0"
language: {
	version: "v0.17.0"
}
`
