//go:build ignore

// gen.go writes schemas_gen.go: the embedded CRDs' schemas, converted at
// build time (package crdgen). Run it with `go generate ./render/crdcheck/`
// after changing crds/; TestGeneratedSchemasMatchCRDs says when it is due.
package main

import (
	"log"
	"os"

	"github.com/gpupolicy/gpupolicy/render/crdcheck/internal/crdgen"
)

func main() {
	src, err := crdgen.GenerateFS(os.DirFS("."), "crds/*.yaml", "crdcheck")
	if err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile("schemas_gen.go", src, 0o644); err != nil {
		log.Fatal(err)
	}
}
