package policy

import (
	"bytes"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"

	"github.com/gpupolicy/gpupolicy/internal/finding"
)

// fileFinding is a policy-files finding about a whole file, at its first
// line.
func fileFinding(file, format string, args ...any) finding.Finding {
	f := RulePolicyFiles.Newf("%s "+format, append([]any{baseName(file)}, args...)...)
	f.Pos = file + ":1:1"
	return f
}

func baseName(file string) string {
	if i := strings.LastIndexAny(file, `/\`); i >= 0 {
		return file[i+1:]
	}
	return file
}

// fileKind names a file mode that is not a regular file.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "not a regular file"
}

// normalizeLineEndings turns CR-only line ends (classic Mac) into LF, and
// CRLF into LF. CUE reads a lone CR as a space: a CR-only file is one line,
// and its first // comment would swallow the rest of the file unseen.
func normalizeLineEndings(files map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(files))
	for n, b := range files {
		if bytes.IndexByte(b, '\r') >= 0 {
			b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
			b = bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
		}
		out[n] = b
	}
	return out
}

// checkFiles refuses what CUE would drop silently or refuse without a
// position: a file of another package than the rest (CUE refuses the
// directory), a file with declarations but no package clause, or package _
// (CUE leaves either out of the policy's package, so its fields would be
// silently ignored). Files that do not parse are left to the loader, which
// reports their syntax errors with positions.
func checkFiles(files map[string][]byte, display func(string) string) finding.List {
	type clause struct {
		file, pkg string
		line, col int
		decls     bool
	}
	var clauses []clause
	count := map[string]int{}
	for _, name := range sortedFileNames(files) {
		f, err := parser.ParseFile(display(name), files[name])
		if err != nil {
			continue
		}
		c := clause{file: name, line: 1, col: 1}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.Package:
				if d.Name != nil {
					c.pkg = d.Name.Name
					if p := d.Name.Pos(); p.IsValid() {
						c.line, c.col = p.Line(), p.Column()
					}
				}
			case *ast.ImportDecl, *ast.CommentGroup, *ast.Attribute:
			default:
				c.decls = true
			}
		}
		clauses = append(clauses, c)
		if c.pkg != "" && c.pkg != "_" {
			count[c.pkg]++
		}
	}
	// The policy's package: the one most files name (ties: the first in
	// name order).
	pkg, most := "", 0
	for _, c := range clauses {
		if count[c.pkg] > most {
			pkg, most = c.pkg, count[c.pkg]
		}
	}
	var ds finding.List
	add := func(c clause, format string, args ...any) {
		f := RulePolicyFiles.Newf(format, args...)
		f.Pos = fmt.Sprintf("%s:%d:%d", display(c.file), c.line, c.col)
		ds = append(ds, f)
	}
	for _, c := range clauses {
		switch {
		case c.decls && (strings.HasPrefix(baseName(c.file), "_") || strings.HasPrefix(baseName(c.file), ".")):
			add(c, "%s starts with %q: CUE's loader leaves such files out of a package, so what it says would be ignored; rename it without the %q", c.file, baseName(c.file)[:1], baseName(c.file)[:1])
		case c.pkg == "_" && (c.decls || pkg != ""):
			add(c, "%s is package _, which is no package: CUE leaves it out of the policy%s, so what it says would be ignored", c.file, inPackage(pkg))
		case c.pkg == "" && c.decls:
			add(c, "%s has no package clause: CUE leaves it out of the policy%s, so what it says would be ignored; start it with package %s", c.file, inPackage(pkg), orDefault(pkg, "lab"))
		case c.pkg != "" && c.pkg != "_" && pkg != "" && c.pkg != pkg:
			add(c, "%s is package %s, but the policy's other files are package %s: a policy directory is one CUE package", c.file, c.pkg, pkg)
		}
	}
	ds.SortByPos()
	return ds
}

func inPackage(pkg string) string {
	if pkg == "" {
		return ""
	}
	return " (package " + pkg + ")"
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func sortedFileNames(files map[string][]byte) []string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// fallbackPos is where a finding about the policy as a whole points when no
// field of it has a position (a section left out entirely): where a file
// embeds schema.#Policy, else the first file's first line.
func fallbackPos(files map[string][]byte, display func(string) string) string {
	names := sortedFileNames(files)
	for _, n := range names {
		for i, l := range strings.Split(string(files[n]), "\n") {
			if j := strings.Index(l, "schema.#Policy"); j >= 0 && !strings.HasPrefix(strings.TrimSpace(l), "//") {
				return fmt.Sprintf("%s:%d:%d", display(n), i+1, j+1)
			}
		}
	}
	if len(names) == 0 {
		return ""
	}
	return display(names[0]) + ":1:1"
}
