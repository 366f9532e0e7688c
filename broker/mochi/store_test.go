package mochi

import (
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"
)

// TestStoreBadRecordDoesNotFailBatch: a record the database refuses (a key
// over bbolt's limit) that reaches the writer in the same batch as good
// records costs only itself.
func TestStoreBadRecordDoesNotFailBatch(t *testing.T) {
	dir := t.TempDir()
	h, _, err := openStoreHook(filepath.Join(dir, "store.db"), filepath.Join(dir, "inflight.db"), false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.db.Close() }()
	// Straight into the queue: enqueue would already refuse the bad key.
	h.ops <- storeOp{key: "good:1", value: []byte("a")}
	h.ops <- storeOp{key: strings.Repeat("k", bbolt.MaxKeySize+1), value: []byte("b")}
	h.ops <- storeOp{key: "good:2", value: []byte("c")}
	h.enqueue(storeOp{key: strings.Repeat("k", bbolt.MaxKeySize+1), value: []byte("d")})
	h.sync()
	close(h.done)
	h.wg.Wait()
	var keys []string
	if err := h.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(inflightBucket)).ForEach(func(k, _ []byte) error {
			keys = append(keys, string(k))
			return nil
		})
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(keys, ",") != "good:1,good:2" {
		t.Fatalf("stored keys %q, want good:1 and good:2", keys)
	}
}
