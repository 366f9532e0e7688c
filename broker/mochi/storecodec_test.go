package mochi

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/iotq/iotq/internal/kvlog"
	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/hooks/storage"
	"github.com/iotq/iotq/internal/mqttcore/packets"
	"go.etcd.io/bbolt"
)

func fullMessage() storage.Message {
	return storage.Message{
		T: storage.InflightKey, ID: "dev-7:513", Client: "dev-7", Origin: "pub-1", TopicName: "a/b/c",
		Payload:     []byte("payload \x00\xff"),
		FixedHeader: packets.FixedHeader{Remaining: 42, Type: packets.Publish, Qos: 1, Dup: true, Retain: true},
		Created:     1763900000, Sent: -3, PacketID: 513,
		Properties: storage.MessageProperties{
			CorrelationData:        []byte{1, 2, 3},
			SubscriptionIdentifier: []int{1, 268435455},
			User:                   []packets.UserProperty{{Key: "k", Val: "v"}, {Key: "", Val: "ü"}},
			ContentType:            "text/plain", ResponseTopic: "r/t",
			MessageExpiryInterval: 3600, TopicAlias: 9, PayloadFormat: 1, PayloadFormatFlag: true,
		},
	}
}

// TestInflightRecordRoundTrip: every field of a stored in-flight message
// comes back from the binary record, and from the JSON of older versions.
func TestInflightRecordRoundTrip(t *testing.T) {
	for name, m := range map[string]storage.Message{
		"full":    fullMessage(),
		"minimal": {ID: "c:1", Client: "c", PacketID: 1, FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}},
	} {
		var got storage.Message
		if err := decodeInflight(encodeInflight(nil, &m), &got); err != nil {
			t.Fatalf("%s: decode binary: %v", name, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: binary round trip\n got %+v\nwant %+v", name, got, m)
		}
		js, err := m.MarshalBinary() // the format earlier versions stored
		if err != nil {
			t.Fatal(err)
		}
		got = storage.Message{}
		if err := decodeInflight(js, &got); err != nil {
			t.Fatalf("%s: decode JSON: %v", name, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Errorf("%s: JSON record\n got %+v\nwant %+v", name, got, m)
		}
	}
}

// TestInflightRecordDamaged: truncated, padded or unknown records are
// errors, never a panic or a half-filled message taken as good.
func TestInflightRecordDamaged(t *testing.T) {
	m := fullMessage()
	b := encodeInflight(nil, &m)
	for i := range len(b) {
		var got storage.Message
		if err := decodeInflight(b[:i], &got); err == nil {
			t.Fatalf("record cut to %d of %d bytes decoded without error", i, len(b))
		}
	}
	var got storage.Message
	if err := decodeInflight(append(b, 0), &got); err == nil {
		t.Fatal("record with a byte too many decoded without error")
	}
	if err := decodeInflight([]byte{0x7f, 1, 2}, &got); err == nil {
		t.Fatal("unknown format decoded without error")
	}
}

// TestStoreReadsOldJSONRecords: in-flight records written by an earlier
// version (JSON records) loads next to new binary records.
func TestStoreReadsOldJSONRecords(t *testing.T) {
	dir := t.TempDir()
	h, _, err := openStoreHook(filepath.Join(dir, "store.db"), filepath.Join(dir, "inflight.log"), false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(h.done); h.wg.Wait(); _ = h.inflight.Close() }() // the bolt hook itself was never started
	old := fullMessage()
	js, err := old.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.inflight.Write([]kvlog.Op{{Key: old.ID, Value: js}}); err != nil {
		t.Fatal(err)
	}
	srv := mqttcore.New(&mqttcore.Options{InlineClient: false})
	cl := srv.NewClient(nil, "t", "dev-8", false)
	pk := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Publish, Qos: 1}, TopicName: "x/y", Payload: []byte("new"), PacketID: 7, Created: 5}
	h.OnQosPublish(cl, pk, 6, 0)
	h.sync()
	got, err := h.StoredInflightMessages()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("loaded %d messages, want 2: %+v", len(got), got)
	}
	if !reflect.DeepEqual(got[0], old) {
		t.Errorf("old JSON record\n got %+v\nwant %+v", got[0], old)
	}
	if n := got[1]; n.ID != "dev-8:7" || n.Client != "dev-8" || string(n.Payload) != "new" || n.PacketID != 7 || n.Sent != 6 || n.TopicName != "x/y" {
		t.Errorf("new binary record: %+v", n)
	}
}

// TestStoreMovesAnEarlierVersionsInflightDB: the in-flight messages in an
// inflight.db (bbolt) of an earlier version, binary and JSON records, move
// into the log at start, the file goes, and they are still there at the
// next start.
func TestStoreMovesAnEarlierVersionsInflightDB(t *testing.T) {
	dir := t.TempDir()
	legacy := filepath.Join(dir, "inflight.db")
	db, err := bbolt.Open(legacy, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	bin := fullMessage()
	js := fullMessage()
	js.ID, js.PacketID = "dev-7:514", 514
	jsBytes, err := js.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte(inflightBucket))
		if err != nil {
			return err
		}
		if err := b.Put([]byte(bin.ID), encodeInflight(nil, &bin)); err != nil {
			return err
		}
		return b.Put([]byte(js.ID), jsBytes)
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	for start := 1; start <= 2; start++ {
		h, _, err := openStoreHook(filepath.Join(dir, "store.db"), filepath.Join(dir, "inflight.log"), false, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatalf("start %d: %v", start, err)
		}
		if _, err := os.Stat(legacy); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("start %d: inflight.db is still there (%v)", start, err)
		}
		got, err := h.StoredInflightMessages()
		close(h.done)
		h.wg.Wait()
		_ = h.inflight.Close()
		if err != nil {
			t.Fatalf("start %d: %v", start, err)
		}
		if len(got) != 2 || !reflect.DeepEqual(got[0], bin) && !reflect.DeepEqual(got[1], bin) {
			t.Fatalf("start %d: loaded %+v, want the two records of inflight.db", start, got)
		}
	}
}
