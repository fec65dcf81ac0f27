package gitrepo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// ErrNothingToCommit is returned by CommitOnly when the paths already match
// HEAD.
var ErrNothingToCommit = errors.New("nothing to commit: the paths already match HEAD")

// Dirty returns the tracked paths, sorted, whose staged or working-tree
// content differs from HEAD, leaving out those under any of except.
// Untracked files are not listed: they are nobody's uncommitted work on a
// tracked file, and committing other paths never touches them.
func (g *Repo) Dirty(except ...string) ([]string, error) {
	cs, err := g.Changes()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range cs {
		if c.Untracked || len(except) > 0 && underAny(c.Path, except) {
			continue
		}
		out = append(out, c.Path)
	}
	return out, nil
}

// FileChange is one path that differs between HEAD, the index and the
// working tree.
type FileChange struct {
	Path string
	// Untracked is a file git does not know (and does not ignore).
	Untracked bool
}

// Changes returns every changed or untracked path of the working tree,
// sorted (git status, ignored files left out).
func (g *Repo) Changes() ([]FileChange, error) {
	wt, err := g.r.Worktree()
	if err != nil {
		return nil, err
	}
	st, err := wt.Status()
	if err != nil {
		return nil, fmt.Errorf("git status: %w", err)
	}
	var out []FileChange
	for p, s := range st {
		if s.Staging == git.Unmodified && s.Worktree == git.Unmodified {
			continue
		}
		out = append(out, FileChange{Path: p, Untracked: s.Staging == git.Untracked && s.Worktree == git.Untracked})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// Under reports whether a slash path is one of dirs or lies under one.
func Under(p string, dirs ...string) bool { return underAny(p, dirs) }

// CommitOnly commits the working tree's content of paths (files or
// directories, slash-separated, relative to the root) on top of HEAD and
// nothing else, like `git commit --only -- PATHS`: other staged changes stay
// staged, the working tree is not touched, and files deleted under a
// directory are deleted in the commit. The index entries of the committed
// paths are updated to match. It returns ErrNothingToCommit when the paths
// already match HEAD.
//
// The author and committer come from the environment (GIT_AUTHOR_NAME,
// GIT_AUTHOR_EMAIL, GIT_AUTHOR_DATE and the GIT_COMMITTER_ ones), then from
// git config (user.name, user.email), as with git.
func (g *Repo) CommitOnly(message string, paths ...string) (Commit, error) {
	if len(paths) == 0 {
		return Commit{}, fmt.Errorf("commit: no paths")
	}
	headRef, err := g.r.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return Commit{}, err
	}
	var parents []plumbing.Hash
	var baseTree plumbing.Hash
	resolved, err := g.r.Head()
	switch {
	case err == nil:
		hc, err := g.r.CommitObject(resolved.Hash())
		if err != nil {
			return Commit{}, err
		}
		parents = []plumbing.Hash{hc.Hash}
		baseTree = hc.TreeHash
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		// No commit yet: this is the first.
	default:
		return Commit{}, err
	}

	// What the paths hold in the working tree.
	type wfile struct {
		rel  string
		hash plumbing.Hash
		mode filemode.FileMode
		info os.FileInfo
	}
	var written []wfile
	newTree := baseTree
	for _, p := range paths {
		p = cleanDir(p)
		if p == "" {
			return Commit{}, fmt.Errorf("commit: refusing to commit the whole working tree")
		}
		abs := filepath.Join(g.Root, filepath.FromSlash(p))
		fi, err := os.Lstat(abs)
		var entries []object.TreeEntry // nil: delete p
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return Commit{}, err
		case fi.IsDir():
			files := map[string]object.TreeEntry{}
			err := filepath.WalkDir(abs, func(fp string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					if d.Name() == ".git" {
						return filepath.SkipDir
					}
					return nil
				}
				rel, _ := filepath.Rel(abs, fp)
				rel = filepath.ToSlash(rel)
				info, err := d.Info()
				if err != nil {
					return err
				}
				h, mode, err := g.storeBlob(fp, info)
				if err != nil {
					return err
				}
				files[rel] = object.TreeEntry{Name: rel, Mode: mode, Hash: h}
				written = append(written, wfile{rel: p + "/" + rel, hash: h, mode: mode, info: info})
				return nil
			})
			if err != nil {
				return Commit{}, err
			}
			if len(files) > 0 {
				h, err := g.buildTree(files)
				if err != nil {
					return Commit{}, err
				}
				entries = []object.TreeEntry{{Mode: filemode.Dir, Hash: h}}
			}
		default:
			h, mode, err := g.storeBlob(abs, fi)
			if err != nil {
				return Commit{}, err
			}
			entries = []object.TreeEntry{{Mode: mode, Hash: h}}
			written = append(written, wfile{rel: p, hash: h, mode: mode, info: fi})
		}
		var leaf *object.TreeEntry
		if len(entries) == 1 {
			leaf = &entries[0]
		}
		newTree, err = g.replaceAt(newTree, strings.Split(p, "/"), leaf)
		if err != nil {
			return Commit{}, err
		}
	}
	if newTree == baseTree && len(parents) > 0 {
		return Commit{}, ErrNothingToCommit
	}
	if newTree.IsZero() {
		newTree, err = g.buildTree(nil)
		if err != nil {
			return Commit{}, err
		}
	}

	author, committer, err := g.signatures()
	if err != nil {
		return Commit{}, err
	}
	c := &object.Commit{
		Author:       author,
		Committer:    committer,
		Message:      strings.TrimRight(message, "\n") + "\n",
		TreeHash:     newTree,
		ParentHashes: parents,
	}
	obj := g.r.Storer.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return Commit{}, err
	}
	ch, err := g.r.Storer.SetEncodedObject(obj)
	if err != nil {
		return Commit{}, err
	}

	// Move HEAD's branch (or HEAD itself when detached), checking that it
	// still points where we started.
	name := plumbing.HEAD
	if headRef.Type() == plumbing.SymbolicReference {
		name = headRef.Target()
	}
	newRef := plumbing.NewHashReference(name, ch)
	if len(parents) > 0 {
		err = g.r.Storer.CheckAndSetReference(newRef, plumbing.NewHashReference(name, parents[0]))
	} else {
		err = g.r.Storer.SetReference(newRef)
	}
	if err != nil {
		return Commit{}, fmt.Errorf("moving %s to the new commit: %w", name.Short(), err)
	}

	// The index now matches the commit for the committed paths.
	idx, err := g.r.Storer.Index()
	if err != nil {
		return Commit{}, err
	}
	var keep []*index.Entry
	for _, e := range idx.Entries {
		if !underAny(e.Name, paths) {
			keep = append(keep, e)
		}
	}
	idx.Entries = keep
	g.smudgeRacilyClean(keep)
	// The cached-tree extension describes trees we just changed; drop it so
	// git recomputes it rather than trusting stale hashes.
	idx.Cache = nil
	for _, w := range written {
		e := idx.Add(w.rel)
		e.Hash = w.hash
		e.Mode = w.mode
		e.ModifiedAt = w.info.ModTime()
		e.Size = uint32(w.info.Size())
	}
	sort.Slice(idx.Entries, func(i, j int) bool { return idx.Entries[i].Name < idx.Entries[j].Name })
	if err := g.r.Storer.SetIndex(idx); err != nil {
		return Commit{}, fmt.Errorf("updating the index (the commit %s was made): %w", Short(ch.String()), err)
	}
	return describe(&object.Commit{Hash: ch, Message: c.Message, Author: author}), nil
}

// smudgeRacilyClean does what git does before it rewrites an index
// (read-cache.c, ce_smudge_racily_clean_entry): an entry whose file was
// modified in the same second as the index was last written, or later, is
// "racily clean" — git trusts its stat data only while the index keeps
// that timestamp, and re-reads the content otherwise. Rewriting the index
// later would make git trust it, so a change of the same size made in that
// second (an unstaged edit beside a render commit) would vanish from git
// status. For each such entry whose file's stat still matches but whose
// content does not, the entry's size is set to 0, so git re-reads it.
// entries are changed in place. Files that cannot be read are left to git
// (it re-reads what it cannot trust).
func (g *Repo) smudgeRacilyClean(entries []*index.Entry) {
	st, ok := g.r.Storer.(interface{ Filesystem() billy.Filesystem })
	if !ok {
		return
	}
	fi, err := st.Filesystem().Stat("index")
	if err != nil {
		return // no index yet: nothing was trusted
	}
	indexSec := fi.ModTime().Unix()
	for _, e := range entries {
		if e.ModifiedAt.Unix() < indexSec || e.Size == 0 || e.Mode == filemode.Submodule {
			continue
		}
		abs := filepath.Join(g.Root, filepath.FromSlash(e.Name))
		wfi, err := os.Lstat(abs)
		if err != nil || wfi.IsDir() || uint32(wfi.Size()) != e.Size || wfi.ModTime().Unix() != e.ModifiedAt.Unix() {
			continue // git sees the stat change itself
		}
		if h, err := hashFile(abs, wfi); err == nil && h != e.Hash {
			e.Size = 0
		}
	}
}

// readBlob returns what git stores for the file at fp: its content, or a
// symlink's target, and its mode.
func readBlob(fp string, fi os.FileInfo) ([]byte, filemode.FileMode, error) {
	if fi.Mode()&os.ModeSymlink != 0 {
		target, err := os.Readlink(fp)
		return []byte(target), filemode.Symlink, err
	}
	mode := filemode.Regular
	if fi.Mode()&0o111 != 0 {
		mode = filemode.Executable
	}
	data, err := os.ReadFile(fp)
	return data, mode, err
}

// hashFile is the blob hash git gives the file at fp, without storing it.
func hashFile(fp string, fi os.FileInfo) (plumbing.Hash, error) {
	data, _, err := readBlob(fp, fi)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	return plumbing.ComputeHash(plumbing.BlobObject, data), nil
}

func (g *Repo) storeBlob(fp string, fi os.FileInfo) (plumbing.Hash, filemode.FileMode, error) {
	data, mode, err := readBlob(fp, fi)
	if err != nil {
		return plumbing.ZeroHash, 0, err
	}
	obj := g.r.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(data)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, 0, err
	}
	if _, err := w.Write(data); err != nil {
		return plumbing.ZeroHash, 0, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, 0, err
	}
	h, err := g.r.Storer.SetEncodedObject(obj)
	return h, mode, err
}

// buildTree writes the trees for files (slash paths → blob entries) and
// returns the root's hash.
func (g *Repo) buildTree(files map[string]object.TreeEntry) (plumbing.Hash, error) {
	sub := map[string]map[string]object.TreeEntry{}
	var entries []object.TreeEntry
	for p, e := range files {
		dir, rest, nested := strings.Cut(p, "/")
		if !nested {
			e.Name = p
			entries = append(entries, e)
			continue
		}
		if sub[dir] == nil {
			sub[dir] = map[string]object.TreeEntry{}
		}
		sub[dir][rest] = e
	}
	for dir, fs := range sub {
		h, err := g.buildTree(fs)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h})
	}
	return g.writeTree(entries)
}

func (g *Repo) writeTree(entries []object.TreeEntry) (plumbing.Hash, error) {
	sort.Sort(object.TreeEntrySorter(entries))
	t := &object.Tree{Entries: entries}
	obj := g.r.Storer.NewEncodedObject()
	if err := t.Encode(obj); err != nil {
		return plumbing.ZeroHash, err
	}
	return g.r.Storer.SetEncodedObject(obj)
}

// replaceAt returns the hash of root with the entry at path replaced by leaf
// (its Name is set here), or removed when leaf is nil; empty trees are
// pruned, and a zero hash stands for an empty tree.
func (g *Repo) replaceAt(root plumbing.Hash, path []string, leaf *object.TreeEntry) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !root.IsZero() {
		t, err := object.GetTree(g.r.Storer, root)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		entries = append(entries, t.Entries...)
	}
	name := path[0]
	i := -1
	for j, e := range entries {
		if e.Name == name {
			i = j
			break
		}
	}
	var repl *object.TreeEntry
	if len(path) == 1 {
		if leaf != nil {
			e := *leaf
			e.Name = name
			repl = &e
		}
	} else {
		var child plumbing.Hash
		if i >= 0 && entries[i].Mode == filemode.Dir {
			child = entries[i].Hash
		}
		h, err := g.replaceAt(child, path[1:], leaf)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if !h.IsZero() {
			repl = &object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h}
		}
	}
	if i >= 0 {
		entries = append(entries[:i], entries[i+1:]...)
	}
	if repl != nil {
		entries = append(entries, *repl)
	}
	if len(entries) == 0 {
		return plumbing.ZeroHash, nil
	}
	return g.writeTree(entries)
}

// signatures returns the author and committer, as git would pick them.
func (g *Repo) signatures() (author, committer object.Signature, err error) {
	cfg, err := g.r.ConfigScoped(config.SystemScope)
	if err != nil {
		return author, committer, err
	}
	pick := func(envName, envEmail, envDate, cfgName, cfgEmail string) (object.Signature, error) {
		s := object.Signature{Name: os.Getenv(envName), Email: os.Getenv(envEmail), When: time.Now()}
		if s.Name == "" {
			s.Name = cfgName
		}
		if s.Name == "" {
			s.Name = cfg.User.Name
		}
		if s.Email == "" {
			s.Email = cfgEmail
		}
		if s.Email == "" {
			s.Email = cfg.User.Email
		}
		if d := os.Getenv(envDate); d != "" {
			t, err := parseGitDate(d)
			if err != nil {
				return s, fmt.Errorf("%s: %w", envDate, err)
			}
			s.When = t
		}
		if s.Name == "" || s.Email == "" {
			return s, fmt.Errorf("no commit identity: set user.name and user.email in git config (or GIT_AUTHOR_NAME and GIT_AUTHOR_EMAIL)")
		}
		return s, nil
	}
	author, err = pick("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_AUTHOR_DATE", cfg.Author.Name, cfg.Author.Email)
	if err != nil {
		return author, committer, err
	}
	committer, err = pick("GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL", "GIT_COMMITTER_DATE", cfg.Committer.Name, cfg.Committer.Email)
	if err != nil {
		// git falls back to the author's identity for the committer.
		committer = author
		if d := os.Getenv("GIT_COMMITTER_DATE"); d != "" {
			if t, err := parseGitDate(d); err == nil {
				committer.When = t
			}
		}
	}
	return author, committer, nil
}

// parseGitDate accepts RFC 3339, "@UNIX" and "UNIX +ZZZZ".
func parseGitDate(s string) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	f := strings.Fields(strings.TrimPrefix(s, "@"))
	if len(f) >= 1 {
		if sec, err := strconv.ParseInt(f[0], 10, 64); err == nil {
			t := time.Unix(sec, 0).UTC()
			if len(f) == 2 {
				if z, err := time.Parse("-0700", f[1]); err == nil {
					t = t.In(z.Location())
				}
			}
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("cannot parse date %q (RFC 3339 or @unix-seconds)", s)
}
