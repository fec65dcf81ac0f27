package schema

import (
	"os"
	"testing"
)

func TestModuleFileMatchesRepository(t *testing.T) {
	b, err := os.ReadFile("../cue.mod/module.cue")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != ModuleFile {
		t.Fatalf("cue.mod/module.cue differs from schema.ModuleFile:\n%s\nvs\n%s", b, ModuleFile)
	}
}
