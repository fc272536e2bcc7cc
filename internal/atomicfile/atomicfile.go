// Package atomicfile writes the files a later reader trusts (tokens, keys,
// state) so that a write that fails half way (a full disk, a crash) never
// leaves a partial or empty file under the real name: the data goes to a
// temporary file in the same directory (mode 0600), which is fsynced and
// then renamed (Write) or linked (Create) into place, and removed on any
// failure. It uses the standard library only.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data: readers see the old content or the new,
// never a mix, an empty file or a prefix. The file and its directory are
// fsynced before Write returns.
func Write(path string, data []byte) error {
	tmp, err := stage(path, data)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// Create writes data to path only if path does not exist; the file appears
// complete or not at all. An existing path is reported with an error
// wrapping fs.ErrExist (and left alone), so two processes creating the same
// file agree on one content.
func Create(path string, data []byte) error {
	tmp, err := stage(path, data)
	if err != nil {
		return err
	}
	err = os.Link(tmp, path)
	os.Remove(tmp)
	if err != nil {
		return err
	}
	syncDir(filepath.Dir(path))
	return nil
}

// stage writes data to a new temporary file next to path and returns its
// name; on failure nothing is left.
func stage(path string, data []byte) (name string, err error) {
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
	if err = f.Chmod(0o600); err != nil {
		return "", err
	}
	if _, err = f.Write(data); err != nil {
		return "", err
	}
	if err = f.Sync(); err != nil {
		return "", err
	}
	if err = f.Close(); err != nil {
		return "", err
	}
	return f.Name(), nil
}

// syncDir makes a rename or link in dir durable; where directories cannot
// be fsynced it does nothing.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
