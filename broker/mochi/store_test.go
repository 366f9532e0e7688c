package mochi

import (
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iotq/iotq/internal/kvlog"
	"github.com/iotq/iotq/internal/mqttcore/hooks/storage"
	"github.com/iotq/iotq/internal/mqttcore/packets"
)

// TestStoreBadRecordDoesNotFailBatch: a record the log refuses (a key
// over its limit) that reaches the writer in the same batch as good
// records costs only itself.
func TestStoreBadRecordDoesNotFailBatch(t *testing.T) {
	dir := t.TempDir()
	h, _, err := openStoreHook(filepath.Join(dir, "store.db"), filepath.Join(dir, "inflight.log"), false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.inflight.Close() }()
	// Straight into the queue: enqueue would already refuse the bad key.
	h.ops <- storeOp{key: "good:1", value: []byte("a")}
	h.ops <- storeOp{key: strings.Repeat("k", kvlog.MaxKey+1), value: []byte("b")}
	h.ops <- storeOp{key: "good:2", value: []byte("c")}
	h.enqueue(storeOp{key: strings.Repeat("k", kvlog.MaxKey+1), value: []byte("d")})
	h.sync()
	close(h.done)
	h.wg.Wait()
	keys := storedKeys(t, h)
	if strings.Join(keys, ",") != "good:1,good:2" {
		t.Fatalf("stored keys %q, want good:1 and good:2", keys)
	}
}

// TestStoreBatchKeepsLastOperationPerKey: whatever the batching, the store
// ends as the operations, applied in order, leave it: a message put and
// deleted (its subscriber acknowledged it before the commit) leaves
// nothing, a record put twice keeps the second value, a delete of an
// earlier committed record removes it even after a put in the same batch.
func TestStoreBatchKeepsLastOperationPerKey(t *testing.T) {
	dir := t.TempDir()
	h, _, err := openStoreHook(filepath.Join(dir, "store.db"), filepath.Join(dir, "inflight.log"), false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.inflight.Close() }()
	h.enqueue(storeOp{key: "c:5", value: []byte("old")})
	h.sync() // committed before the rest
	for _, op := range []storeOp{
		{key: "c:1", value: []byte("x")},
		{key: "c:1"},
		{key: "c:2", value: []byte("y")},
		{key: "c:3", value: []byte("z1")},
		{key: "c:3", value: []byte("z2")},
		{key: "c:4"},
		{key: "c:5", value: []byte("new")},
		{key: "c:5"},
		{key: "c:6"},
		{key: "c:6", value: []byte("w")},
	} {
		h.ops <- op
	}
	h.sync()
	close(h.done)
	h.wg.Wait()
	got := map[string]string{}
	if err := h.inflight.Each(func(k string, v []byte) error {
		got[k] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"c:2": "y", "c:3": "z2", "c:6": "w"}
	if len(got) != len(want) {
		t.Fatalf("store holds %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("store holds %v, want %v", got, want)
		}
	}
}

// TestStoreMovesClientExchangesToTheirOwnKeys: a client's QoS 2 exchange
// (its PUBREC record) that an earlier version stored under the key of the
// server's messages moves to its own key when the store is read at start,
// so completing the exchange later removes it; a message of the server's
// keeps its key.
func TestStoreMovesClientExchangesToTheirOwnKeys(t *testing.T) {
	dir := t.TempDir()
	h, _, err := openStoreHook(filepath.Join(dir, "store.db"), filepath.Join(dir, "inflight.log"), false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = h.inflight.Close() }()
	record := func(typ byte, id uint16) []byte {
		m := &storage.Message{T: storage.InflightKey, Client: "c", PacketID: id, FixedHeader: packets.FixedHeader{Type: typ, Qos: 2}}
		return encodeInflight(nil, m)
	}
	h.ops <- storeOp{key: "c:7", value: record(packets.Pubrec, 7)}
	h.ops <- storeOp{key: "c:8", value: record(packets.Publish, 8)}
	h.sync()
	msgs, err := h.StoredInflightMessages()
	if err != nil {
		t.Fatal(err)
	}
	close(h.done)
	h.wg.Wait()
	if len(msgs) != 2 {
		t.Fatalf("read %d records, want 2", len(msgs))
	}
	keys := storedKeys(t, h)
	if strings.Join(keys, ",") != "c:7:in,c:8" {
		t.Fatalf("stored keys %q, want c:7:in and c:8", keys)
	}
}

// storedKeys returns the keys of h's in-flight records, in key order.
func storedKeys(t *testing.T, h *storeHook) []string {
	t.Helper()
	var keys []string
	if err := h.inflight.Each(func(k string, _ []byte) error {
		keys = append(keys, k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}
