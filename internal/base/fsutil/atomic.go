// Package fsutil holds the few file-system primitives every other package
// shares, written once: the atomic file writer (WriteFile, CreateFile,
// Write), the checksummed JSON of conch's state files on top of it
// (WriteJSON, WriteJSONDurable, CreateJSON, ReadJSON, ErrDamaged: json.go)
// and the flock(2) helpers (Lock, TryLock, Unlock, LockFile). It
// uses the standard library only (not even net), so the leaves (journal,
// ledger, approvals, auth, shellenv) may import it.
//
// The writers never leave a partial or empty file under the real name: the
// data goes to a temporary file in the same directory (".<name>.*.tmp",
// created with the explicit mode, never the umask's), which is fsynced and
// then renamed (WriteFile) or linked (CreateFile) into place, and removed on
// any failure. A failed write (a full disk, say) returns an error naming the
// file and wrapping the system's error (errors.Is(err, syscall.ENOSPC)
// holds), and leaves the old content in place.
package fsutil

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Options tunes Write. The zero value is mode 0600, fsynced, no check.
type Options struct {
	// Perm is the file's mode (0600 when zero). It is set with fchmod, so
	// the process umask does not narrow it.
	Perm fs.FileMode
	// NoSync skips the fsyncs of the file and its directory: readers still
	// see the old or the new content, also after this process crashes, but
	// a machine crash may lose the write. For hot, rewritable state only.
	NoSync bool
	// Check, when set, is called with the name of the complete temporary
	// file before it replaces the target; its error aborts the write (the
	// target is left alone) and is returned as is.
	Check func(tmp string) error
}

// WriteFile replaces path with data (mode perm, fsynced with its
// directory): readers see the old content or the new, never a mix, an empty
// file or a prefix.
func WriteFile(path string, data []byte, perm fs.FileMode) error {
	return Write(path, data, Options{Perm: perm})
}

// Write is WriteFile with options.
func Write(path string, data []byte, o Options) error {
	tmp, err := stage(path, data, o.Perm, !o.NoSync)
	if err != nil {
		return err
	}
	if o.Check != nil {
		if err := o.Check(tmp); err != nil {
			os.Remove(tmp)
			return err
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	if !o.NoSync {
		SyncDir(filepath.Dir(path))
	}
	return nil
}

// CreateFile writes data to path (mode perm, fsynced) only if path does
// not exist; the file appears complete or not at all. An existing path is
// reported with an error wrapping fs.ErrExist (and left alone), so two
// processes creating the same file agree on one content.
func CreateFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := stage(path, data, perm, true)
	if err != nil {
		return err
	}
	err = os.Link(tmp, path)
	os.Remove(tmp)
	if err != nil {
		return err
	}
	SyncDir(filepath.Dir(path))
	return nil
}

// stage writes data to a new temporary file next to path and returns its
// name; on failure nothing is left.
func stage(path string, data []byte, perm fs.FileMode, sync bool) (name string, err error) {
	if perm == 0 {
		perm = 0o600
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("write %s: %w", filepath.Base(path), err)
		}
	}()
	if err = f.Chmod(perm); err != nil {
		return "", err
	}
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	if sync {
		if err = f.Sync(); err != nil {
			return "", err
		}
	}
	if err = f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// SyncDir fsyncs the directory dir, making a rename, link, creation or
// removal in it durable. Where directories cannot be opened or fsynced it
// returns that error; callers that only want best effort ignore it.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
