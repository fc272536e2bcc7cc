// Package patch parses and applies patches in the "*** Begin Patch"
// format of the apply_patch tool (docs/tools.md).
//
// Apply is atomic: it parses the whole patch, checks every path, and
// computes every new file content in memory before it writes anything;
// then it stages every new content in a temporary file next to its
// target, backs up every file it replaces or deletes with a hard link,
// renames the temporary files over their targets, and rolls back from
// the backups if any step fails. Writes go through an os.Root opened on
// the workspace (or on "/" when workspaceOnly is off), so a path cannot
// leave the workspace even if a directory is swapped for a symlink
// between the check and the write.
//
// The package has no dependencies beyond the standard library and does
// not log.
package patch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Limits of the input.
const (
	// MaxPatchBytes is the largest patch accepted.
	MaxPatchBytes = 8 << 20
	// MaxFileBytes is the largest file that can be updated.
	MaxFileBytes = 16 << 20
)

// Options configure Apply. The zero value applies patches inside the
// process's current directory with workspaceOnly on.
type Options struct {
	// Workspace is the root against which relative paths resolve and,
	// unless AllowOutside, the boundary no path may leave. Default: the
	// current directory.
	Workspace string
	// AllowOutside turns workspaceOnly off: any path the process can
	// write is allowed.
	AllowOutside bool
	// ViewRoot, if set, is an absolute path that names Workspace in the
	// caller's view (a sandbox's "/workspace"): patch paths under it are
	// mapped onto Workspace.
	ViewRoot string
	// Protected are absolute host paths (files or directories) that
	// cannot be written or deleted: sandbox.protectPaths. A patch that
	// touches one fails with "Path is protected in the sandbox: <path>".
	Protected []string
}

// Result is a successful application.
type Result struct {
	// Text is the success text: "Success. Updated the following files:"
	// and one "A|M|D <path>" line per path.
	Text string
	// Added, Modified and Deleted are the summary lists (display paths,
	// patch order, de-duplicated).
	Added, Modified, Deleted []string
	// Files are the files whose content changed, with their hashes, for
	// the ledger.
	Files []FileChange
	// PatchSHA256 is the hex sha256 of the input as given.
	PatchSHA256 string
}

// FileChange is one file a patch changed.
type FileChange struct {
	Path         string // display path
	Op           string // "add", "modify" or "delete"
	SHA256Before string // "" when the file did not exist
	SHA256After  string // "" when the file was deleted
}

// Digest returns the hex sha256 of a patch input, as recorded in the
// ledger.
func Digest(input string) string {
	sum := sha256.Sum256([]byte(input))
	return hex.EncodeToString(sum[:])
}

// Apply parses input and applies it to the workspace of opt. Failures are
// *Error (or *PartialError, which also is an *Error through errors.As)
// with the tool's codes and texts; nothing is written unless
// every operation of the patch can be applied.
func Apply(ctx context.Context, input string, opt Options) (*Result, error) {
	if len(input) > MaxPatchBytes {
		return nil, errorf(CodeInvalidPatch, "Patch too large: %d bytes (limit %d bytes).", len(input), MaxPatchBytes)
	}
	p, err := Parse(input)
	if err != nil {
		return nil, err
	}
	pl, err := newPlanner(opt)
	if err != nil {
		return nil, err
	}
	defer pl.root.Close()
	if err := pl.plan(p); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, errorf(CodeAborted, "Aborted")
	}
	if err := pl.write(); err != nil {
		return nil, err
	}
	res := &Result{PatchSHA256: Digest(input), Added: []string{}, Modified: []string{}, Deleted: []string{}}
	var b strings.Builder
	b.WriteString("Success. Updated the following files:")
	seen := map[string]bool{}
	for _, s := range pl.summary {
		key := s.letter + " " + s.path
		if seen[key] {
			continue
		}
		seen[key] = true
		b.WriteString("\n" + key)
		switch s.letter {
		case "A":
			res.Added = append(res.Added, s.path)
		case "M":
			res.Modified = append(res.Modified, s.path)
		case "D":
			res.Deleted = append(res.Deleted, s.path)
		}
	}
	res.Text = b.String()
	for _, t := range pl.order {
		fc := FileChange{Path: t.display}
		switch {
		case !t.dirty || !t.existed && !t.exists:
			continue
		case !t.existed:
			fc.Op = "add"
		case !t.exists:
			fc.Op = "delete"
		default:
			fc.Op = "modify"
		}
		fc.SHA256Before = t.hashBefore
		if t.exists {
			fc.SHA256After = hashBytes(t.content)
		}
		res.Files = append(res.Files, fc)
	}
	return res, nil
}

// target is one path the patch touches, keyed by its resolved location.
type target struct {
	rel     string // relative to the planner's root
	display string
	// The state before the patch.
	loaded     bool
	existed    bool
	isLink     bool
	mode       fs.FileMode
	uid, gid   int
	hashBefore string
	// The state after the operations planned so far.
	exists  bool
	content []byte
	read    bool // content holds the file's current content (Update)
	dirty   bool // an operation changed the state: it is written
}

type summaryLine struct{ letter, path string }

type planner struct {
	opt      Options
	ws       string // workspace as given (absolute, clean)
	wsReal   string // its realpath
	rootPath string // where root is opened: wsReal, or "/" without workspaceOnly
	root     *os.Root
	targets  map[string]*target
	order    []*target
	summary  []summaryLine
	named    string // the display path of the last target call
}

func newPlanner(opt Options) (*planner, error) {
	ws := opt.Workspace
	if ws == "" {
		var err error
		if ws, err = os.Getwd(); err != nil {
			return nil, errorf(CodeIO, "Cannot determine the workspace: %v", err)
		}
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return nil, errorf(CodeIO, "Cannot determine the workspace: %v", err)
	}
	real, err := filepath.EvalSymlinks(ws)
	if err != nil {
		return nil, errorf(CodeIO, "Workspace %s is not accessible: %v", ws, osErr(err))
	}
	pl := &planner{opt: opt, ws: ws, wsReal: real, rootPath: real, targets: map[string]*target{}}
	if opt.AllowOutside {
		// The file system's root ("/"; on Windows the workspace's
		// drive: a path on another drive is refused in target).
		pl.rootPath = hostRules.root(real)
	}
	if pl.root, err = os.OpenRoot(pl.rootPath); err != nil {
		return nil, errorf(CodeIO, "Workspace %s is not accessible: %v", ws, osErr(err))
	}
	return pl, nil
}

func (pl *planner) plan(p *Patch) error {
	for _, f := range p.Files {
		switch f.Kind {
		case Add:
			t, err := pl.target(f.Path, true)
			if err != nil {
				return err
			}
			if err := pl.load(t, false, false); err != nil {
				return err
			}
			t.exists, t.content, t.read, t.dirty = true, []byte(f.Content), true, true
			pl.summary = append(pl.summary, summaryLine{"A", pl.named})
		case Delete:
			t, err := pl.target(f.Path, false)
			if err != nil {
				return err
			}
			name := pl.named
			if err := pl.load(t, true, false); err != nil {
				return err
			}
			if !t.exists {
				return errorf(CodeInvalidPatch, "Failed to delete file %s: %s", name, syscall.ENOENT)
			}
			t.exists, t.content, t.dirty = false, nil, true
			pl.summary = append(pl.summary, summaryLine{"D", name})
		case Update:
			t, err := pl.target(f.Path, true)
			if err != nil {
				return err
			}
			name := pl.named
			if err := pl.load(t, true, true); err != nil {
				return err
			}
			if !t.exists {
				return errorf(CodeInvalidPatch, "Failed to read file to update %s: %s", name, syscall.ENOENT)
			}
			if bytes.IndexByte(t.content, 0) >= 0 {
				return errorf(CodeInvalidPatch, "Cannot patch binary file %s", name)
			}
			out, err := updateContent(t.content, f.Chunks, name)
			if err != nil {
				return err
			}
			if f.MoveTo == "" {
				t.content, t.dirty = out, true
				pl.summary = append(pl.summary, summaryLine{"M", name})
				continue
			}
			dst, err := pl.target(f.MoveTo, true)
			if err != nil {
				return err
			}
			dstName := pl.named
			if err := pl.load(dst, false, false); err != nil {
				return err
			}
			// The source name goes away: a symlink source is removed
			// itself, not its target.
			src, err := pl.target(f.Path, false)
			if err != nil {
				return err
			}
			if err := pl.load(src, true, false); err != nil {
				return err
			}
			if src != dst {
				src.exists, src.content, src.dirty = false, nil, true
			}
			dst.exists, dst.content, dst.read, dst.dirty = true, out, true, true
			pl.summary = append(pl.summary, summaryLine{"M", dstName})
		}
	}
	return nil
}

// target resolves a patch path and returns its entry. follow follows
// a final symlink (Add, Update, Move to); without it the link itself is
// the target (Delete, the source of a move).
func (pl *planner) target(path string, follow bool) (*target, error) {
	abs := path
	if pl.opt.ViewRoot != "" && filepath.IsAbs(abs) {
		vr := filepath.Clean(pl.opt.ViewRoot)
		if c := filepath.Clean(abs); within(vr, c) {
			rest, _ := filepath.Rel(vr, c)
			abs = filepath.Join(pl.ws, rest)
		}
	}
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(pl.ws, abs)
	}
	abs = filepath.Clean(abs)
	display := abs
	if within(pl.ws, abs) {
		display, _ = filepath.Rel(pl.ws, abs)
	} else if within(pl.wsReal, abs) {
		display, _ = filepath.Rel(pl.wsReal, abs)
	}
	only := !pl.opt.AllowOutside
	escape := errorf(CodeOutside, "Path escapes workspace: %s", path)
	if only && !within(pl.ws, abs) && !within(pl.wsReal, abs) {
		return nil, escape
	}
	real, err := pl.realParent(abs, path)
	if err != nil {
		return nil, err
	}
	if only && !within(pl.wsReal, filepath.Dir(real)) {
		return nil, escape
	}
	if real == pl.wsReal || isFSRoot(real) {
		return nil, errorf(CodeInvalidPatch, "Cannot patch %s: is a directory", display)
	}
	if follow {
		for hops := 0; ; hops++ {
			fi, err := os.Lstat(real)
			if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
				break
			}
			if hops == 40 {
				return nil, errorf(CodeIO, "Cannot resolve %s: %s", display, syscall.ELOOP)
			}
			dest, err := os.Readlink(real)
			if err != nil {
				return nil, errorf(CodeIO, "Cannot resolve %s: %v", display, osErr(err))
			}
			if !filepath.IsAbs(dest) {
				dest = filepath.Join(filepath.Dir(real), dest)
			}
			if real, err = pl.realParent(filepath.Clean(dest), path); err != nil {
				return nil, err
			}
			if only && !within(pl.wsReal, filepath.Dir(real)) {
				return nil, escape
			}
		}
	}
	if pl.protected(abs, real) {
		return nil, errorf(CodeOutside, "Path is protected in the sandbox: %s", display)
	}
	var rel string
	switch r := hostRules.root(real); {
	case hostRules.same(pl.rootPath, r):
		rel = real[len(r):]
	case pl.opt.AllowOutside:
		// The root is the workspace's drive (Windows): real is on
		// another, which the os.Root cannot reach.
		return nil, errorf(CodeOutside, "Cannot patch %s: it is on another drive than the workspace", display)
	default:
		rel, _ = filepath.Rel(pl.rootPath, real)
	}
	pl.named = display
	if t := pl.targets[rel]; t != nil {
		return t, nil
	}
	t := &target{rel: rel, display: display}
	pl.targets[rel] = t
	pl.order = append(pl.order, t)
	return t, nil
}

// protected reports whether a target, named abs and resolved to real,
// lies in one of Options.Protected. A protected path is compared as
// given, with the workspace's symlinks resolved, and as its own target
// when it is a symlink, so neither a workspace named through a link nor a
// link inside it (hk -> .git/hooks, .git/hooks -> elsewhere) gets around it.
func (pl *planner) protected(abs, real string) bool {
	for _, pr := range pl.opt.Protected {
		if pr == "" {
			continue
		}
		pr = filepath.Clean(pr)
		cands := []string{pr}
		if rel, err := filepath.Rel(pl.ws, pr); err == nil && within(pl.ws, pr) {
			cands = append(cands, filepath.Join(pl.wsReal, rel))
		}
		if r, err := filepath.EvalSymlinks(pr); err == nil {
			cands = append(cands, r)
		}
		for _, c := range cands {
			if within(c, real) || within(c, abs) {
				return true
			}
		}
	}
	return false
}

// realParent returns abs with its directory resolved: the deepest existing
// ancestor is resolved with symlinks and the missing components are
// appended. The final component is kept as is.
func (pl *planner) realParent(abs, path string) (string, error) {
	dir, leaf := filepath.Dir(abs), filepath.Base(abs)
	var missing []string
	for {
		_, err := os.Lstat(dir)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || isFSRoot(dir) {
			return "", errorf(CodeIO, "Cannot resolve %s: %v", path, osErr(err))
		}
		missing = append(missing, filepath.Base(dir))
		dir = filepath.Dir(dir)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if !pl.opt.AllowOutside {
			// A broken directory symlink: where it points cannot be
			// checked.
			return "", errorf(CodeOutside, "Path escapes workspace: %s", path)
		}
		return "", errorf(CodeIO, "Cannot resolve %s: %v", path, osErr(err))
	}
	for i := len(missing) - 1; i >= 0; i-- {
		real = filepath.Join(real, missing[i])
	}
	return filepath.Join(real, leaf), nil
}

// load reads a target's state before the patch the first time it is
// touched. needRead loads its content (Update); checkLinks refuses
// files with other hard links under workspaceOnly (Update, Move, Delete).
func (pl *planner) load(t *target, checkLinks, needRead bool) error {
	if !t.loaded {
		t.loaded = true
		fi, err := pl.root.Lstat(t.rel)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return errorf(CodeIO, "Cannot access %s: %v", t.display, osErr(err))
		case fi.IsDir():
			return errorf(CodeInvalidPatch, "Cannot patch %s: is a directory", t.display)
		case fi.Mode()&fs.ModeSymlink != 0:
			t.existed, t.exists, t.isLink = true, true, true
		case !fi.Mode().IsRegular():
			return errorf(CodeInvalidPatch, "Cannot patch %s: not a regular file", t.display)
		default:
			t.existed, t.exists = true, true
			t.mode = fi.Mode()
			var links uint64
			t.uid, t.gid, links = fileOwner(func() (*os.File, error) { return pl.root.Open(t.rel) }, fi)
			if links > 1 {
				t.mode |= modeMultiLink
			}
			if fi.Size() > MaxFileBytes && needRead {
				return errorf(CodeInvalidPatch, "File too large to patch: %s (%d bytes, limit %d bytes)", t.display, fi.Size(), MaxFileBytes)
			}
			if err := pl.hash(t, needRead); err != nil {
				return err
			}
		}
	}
	if checkLinks && !pl.opt.AllowOutside && t.existed && !t.isLink && t.mode&modeMultiLink != 0 {
		return errorf(CodeOutside, "Path escapes workspace: %s", t.display)
	}
	if needRead && t.exists && !t.read {
		if t.isLink {
			return errorf(CodeInvalidPatch, "Failed to read file to update %s: %s", t.display, syscall.ELOOP)
		}
		if err := pl.hash(t, true); err != nil {
			return err
		}
	}
	return nil
}

// modeMultiLink marks (in target.mode, never written) a regular file with
// more than one hard link.
const modeMultiLink = fs.ModeTemporary

// hash records the file's sha256 and, with keep, its content.
func (pl *planner) hash(t *target, keep bool) error {
	f, err := pl.root.Open(t.rel)
	if err != nil {
		return errorf(CodeIO, "Failed to read file %s: %v", t.display, osErr(err))
	}
	defer f.Close()
	h := sha256.New()
	var r io.Reader = f
	if keep {
		b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
		if err != nil {
			return errorf(CodeIO, "Failed to read file to update %s: %v", t.display, osErr(err))
		}
		if len(b) > MaxFileBytes {
			return errorf(CodeInvalidPatch, "File too large to patch: %s (limit %d bytes)", t.display, MaxFileBytes)
		}
		t.content, t.read = b, true
		r = bytes.NewReader(b)
	}
	if _, err := io.Copy(h, r); err != nil {
		return errorf(CodeIO, "Failed to read file %s: %v", t.display, osErr(err))
	}
	t.hashBefore = hex.EncodeToString(h.Sum(nil))
	return nil
}

func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// osErr strips the operation and path from an *fs.PathError: messages
// carry the patch's path themselves.
func osErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}
