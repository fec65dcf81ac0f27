package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/gpupolicy/gpupolicy/internal/output/sariftest"
)

// TestMain lets testscript run the gpupolicy binary as a command.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"gpupolicy": func() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) },
	})
}

// TestScripts runs the CLI scenarios in testdata/script: one txtar file per
// scenario with its input files, command lines and expected output.
//
// Extra commands:
//
//	cplab [-series] DIR  copy the repository's policies/lab to DIR; with
//	                     -series, with the locks and template of the
//	                     write-ups' series (testdata/lab-series: the main
//	                     lock of 4, the cache lock of 1)
//	exits N CMD ARGS...  run CMD and require exit status N exactly
//	tree DIR             print every path under DIR (DIR itself as ".") with
//	                     its mode, size, modification time and content hash:
//	                     two listings differ if anything was written there
//	empty DIR            fail unless DIR holds nothing (! empty: unless it does)
//	sarifvalid FILE      fail unless FILE (stdout: the last command's
//	                     output) is valid against the official SARIF 2.1.0
//	                     JSON schema (internal/output/sariftest)
func TestScripts(t *testing.T) {
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("REPO", repo)
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"cplab": func(ts *testscript.TestScript, neg bool, args []string) {
				series := len(args) == 2 && args[0] == "-series"
				if series {
					args = args[1:]
				}
				if len(args) != 1 {
					ts.Fatalf("usage: cplab [-series] DIR")
				}
				copyDir(ts, filepath.Join(repo, "policies", "lab"), ts.MkAbs(args[0]))
				if series {
					copyDir(ts, filepath.Join(repo, "cmd", "gpupolicy", "testdata", "lab-series"), ts.MkAbs(args[0]))
				}
			},
			"tree": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 || neg {
					ts.Fatalf("usage: tree DIR")
				}
				writeTree(ts, ts.MkAbs(args[0]))
			},
			"empty": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: empty DIR")
				}
				entries, err := os.ReadDir(ts.MkAbs(args[0]))
				ts.Check(err)
				if (len(entries) == 0) == neg {
					var names []string
					for _, e := range entries {
						names = append(names, e.Name())
					}
					ts.Fatalf("%s holds %v", args[0], names)
				}
			},
			"sarifvalid": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) != 1 {
					ts.Fatalf("usage: sarifvalid FILE (stdout: the last command's)")
				}
				err := sariftest.Validate([]byte(ts.ReadFile(args[0])))
				if neg && err == nil {
					ts.Fatalf("%s is a valid SARIF 2.1.0 log", args[0])
				}
				if !neg && err != nil {
					ts.Fatalf("%s: %v", args[0], err)
				}
			},
			"exits": func(ts *testscript.TestScript, neg bool, args []string) {
				if len(args) < 2 {
					ts.Fatalf("usage: exits N CMD ARGS...")
				}
				want, err := strconv.Atoi(args[0])
				if err != nil {
					ts.Fatalf("exits: %v", err)
				}
				got := 0
				if err := ts.Exec(args[1], args[2:]...); err != nil {
					var ee *exec.ExitError
					if !errors.As(err, &ee) {
						ts.Fatalf("exits: %v", err)
					}
					got = ee.ExitCode()
				}
				if got != want {
					ts.Fatalf("%s exited %d, want %d", args[1], got, want)
				}
			},
		},
	})
}

func copyDir(ts *testscript.TestScript, from, to string) {
	entries, err := os.ReadDir(from)
	ts.Check(err)
	ts.Check(os.MkdirAll(to, 0o755))
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		ts.Check(err)
		ts.Check(os.WriteFile(filepath.Join(to, e.Name()), b, 0o644))
	}
}

// writeTree prints a line per path under root: slash path, mode, size,
// modification time (ns) and, for a file, its SHA-256.
func writeTree(ts *testscript.TestScript, root string) {
	out := ts.Stdout()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		sum := ""
		if fi.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		fmt.Fprintf(out, "%s %v %d %d %s\n", filepath.ToSlash(rel), fi.Mode(), fi.Size(), fi.ModTime().UnixNano(), sum)
		return nil
	})
	ts.Check(err)
}
