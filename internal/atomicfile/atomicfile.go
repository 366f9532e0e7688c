// Package atomicfile writes files so that a reader (or a crashed or
// interrupted writer) never sees half a file: the content goes to a
// temporary file in the same directory, which is synced, given its mode
// and renamed over the target. It is iotq's one atomic-write helper (ready
// files, record files, certificates, ticket caches, password files, run
// state).
//
// Concurrency: no state; concurrent writers of one path each write a whole
// file and the last rename wins. It imports only the standard library.
package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// WriteFile writes data to path atomically with mode perm. On error path is
// untouched and the temporary file removed; the error names path.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Write is WriteFile for content that fill produces.
func Write(path string, perm os.FileMode, fill func(w io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	err = fill(tmp)
	if err == nil {
		err = tmp.Chmod(perm)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
