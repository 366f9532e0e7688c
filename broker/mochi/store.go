package mochi

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iotq/iotq/internal/kvlog"
	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/hooks/storage"
	"github.com/iotq/iotq/internal/mqttcore/hooks/storage/bolt"
	"github.com/iotq/iotq/internal/mqttcore/packets"
	"go.etcd.io/bbolt"
)

// storeHook persists sessions, subscriptions and retained messages through
// mochi's bolt hook (STATE_DIR/store.db; low rate), and in-flight QoS 1/2
// messages in an append-only log of its own (STATE_DIR/inflight.log,
// internal/kvlog) with group commit: operations are queued and written by
// one goroutine in batches (one append per batch: whatever was queued
// while the previous one was written), instead of one write per message.
// The queue is flushed on Stop. Records are binary (storecodec.go); JSON
// records of earlier versions are still read, and an inflight.db (bbolt)
// of earlier versions is moved into the log at start.
//
// It also fixes a bug of mochi v2.7.9's storage hooks, which do not save the
// packet identifier of in-flight messages (after a restart all messages of
// a session had identifier 0 and overwrote each other).
//
// Durability: a QoS 1/2 PUBLISH is acknowledged only after the in-flight
// copies it produced are written (afterCommit; the group commit still
// batches, the acknowledgements wait for their batch), so a crash loses no
// acknowledged message: a batch reaches the OS (and the disk with fsync)
// before the PUBACK leaves, and a batch a crash cuts short is dropped
// whole at the next start, none of its acknowledgements having left.
type storeHook struct {
	*bolt.Hook

	log      *slog.Logger
	errLog   *rateLimitedLog // per-message problems
	inflight *kvlog.Log
	// inflightMu serialises the writer's batches with reads of the log at
	// start (StoredInflightMessages): a kvlog.Log has one owner at a time.
	inflightMu sync.Mutex
	ops        chan storeOp
	flush      chan chan struct{}
	done       chan struct{}
	wg         sync.WaitGroup
	stop       sync.Once
}

const (
	inflightBucket = "inflight" // of an inflight.db of earlier versions
	groupCommitMax = 4096
	// legacyInflightName is the bbolt file earlier versions kept in-flight
	// messages in, next to the log.
	legacyInflightName = "inflight.db"
)

type storeOp struct {
	key   string
	value []byte // nil: delete
	after func() // if set, not a record: run once everything queued before it is committed
}

func openStoreHook(path, inflightPath string, fsync bool, log *slog.Logger) (*storeHook, *bolt.Options, error) {
	bo := *bbolt.DefaultOptions
	bo.Timeout = 2 * time.Second
	bo.NoSync = !fsync
	lg, dropped, err := kvlog.Open(inflightPath, fsync)
	if err != nil {
		return nil, nil, fmt.Errorf("broker: open in-flight store: %w (is another broker using this state directory?)", err)
	}
	if dropped > 0 {
		log.Warn("store: the in-flight log ended in a batch cut short (a crash while it was written); dropped it, none of its messages had been acknowledged", "path", inflightPath, "bytes", dropped)
	}
	legacy := filepath.Join(filepath.Dir(inflightPath), legacyInflightName)
	if err := importLegacyInflight(legacy, lg, &bo, log); err != nil {
		_ = lg.Close()
		return nil, nil, err
	}
	h := &storeHook{
		Hook:     new(bolt.Hook),
		log:      log,
		errLog:   newRateLimitedLog(log, time.Second),
		inflight: lg,
		ops:      make(chan storeOp, 8192),
		flush:    make(chan chan struct{}),
		done:     make(chan struct{}),
	}
	h.wg.Add(1)
	go h.writer()
	return h, &bolt.Options{Path: path, Bucket: "iotq", Options: &bo}, nil
}

// importLegacyInflight moves the records of an inflight.db that an earlier
// version wrote into lg, and removes the file. Records go in only while lg
// is empty: a log that holds records already took them over at a start
// that then failed to remove the file.
func importLegacyInflight(path string, lg *kvlog.Log, bo *bbolt.Options, log *slog.Logger) error {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if lg.Len() == 0 {
		db, err := bbolt.Open(path, 0o600, bo)
		if err != nil {
			return fmt.Errorf("broker: open the in-flight store of an earlier version, %s, to move its messages: %w", path, err)
		}
		var ops []kvlog.Op
		err = db.View(func(tx *bbolt.Tx) error {
			b := tx.Bucket([]byte(inflightBucket))
			if b == nil {
				return nil
			}
			return b.ForEach(func(k, v []byte) error {
				ops = append(ops, kvlog.Op{Key: string(k), Value: bytes.Clone(v)}) // ForEach's bytes are the file's pages
				return nil
			})
		})
		if cerr := db.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = lg.Write(ops)
		}
		if err != nil {
			return fmt.Errorf("broker: move the in-flight messages of %s (an earlier version's store) into the log: %w", path, err)
		}
		log.Info("store: moved the in-flight messages of an earlier version's store into the log", "from", path, "messages", len(ops))
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("broker: remove %s, whose messages are in the in-flight log now: %w (remove it by hand)", path, err)
	}
	return nil
}

// inflightKeyOf is the store key of an in-flight record: the client id and
// the packet identifier, and ":in" for the client's own QoS 2 exchanges,
// whose identifiers are a space apart from the server's messages'. (A key
// ends in digits or ":in", so no client id makes two records' keys equal.)
func inflightKeyOf(cl *mqttcore.Client, pk packets.Packet) string {
	k := cl.ID + ":" + strconv.FormatUint(uint64(pk.PacketID), 10)
	if mqttcore.ClientExchange(&pk) {
		k += inboundKeySuffix
	}
	return k
}

const inboundKeySuffix = ":in"

// OnQosPublish queues the in-flight message for storage.
func (h *storeHook) OnQosPublish(cl *mqttcore.Client, pk packets.Packet, sent int64, resends int) {
	props := &pk.Properties // encoded at once: no copy needed
	m := &storage.Message{
		ID:          inflightKeyOf(cl, pk),
		T:           storage.InflightKey,
		Client:      cl.ID,
		Origin:      pk.Origin,
		FixedHeader: pk.FixedHeader,
		TopicName:   pk.TopicName,
		Payload:     pk.Payload,
		Sent:        sent,
		Seq:         pk.Seq,
		Created:     pk.Created,
		PacketID:    pk.PacketID,
		Properties: storage.MessageProperties{
			PayloadFormat:          props.PayloadFormat,
			PayloadFormatFlag:      props.PayloadFormatFlag,
			MessageExpiryInterval:  props.MessageExpiryInterval,
			ContentType:            props.ContentType,
			ResponseTopic:          props.ResponseTopic,
			CorrelationData:        props.CorrelationData,
			SubscriptionIdentifier: props.SubscriptionIdentifier,
			TopicAlias:             props.TopicAlias,
			User:                   props.User,
		},
	}
	b := encodeInflight(make([]byte, 0, 64+len(m.ID)+len(m.Client)+len(m.Origin)+len(m.TopicName)+len(m.Payload)), m)
	h.enqueue(storeOp{key: m.ID, value: b})
}

// OnQosComplete removes a resolved in-flight message.
func (h *storeHook) OnQosComplete(cl *mqttcore.Client, pk packets.Packet) {
	h.enqueue(storeOp{key: inflightKeyOf(cl, pk)})
}

// OnQosDropped removes a dropped in-flight message.
func (h *storeHook) OnQosDropped(cl *mqttcore.Client, pk packets.Packet) {
	h.enqueue(storeOp{key: inflightKeyOf(cl, pk)})
}

// afterCommit runs fn (which must not block) once every operation queued
// so far is committed: the broker acknowledges a QoS 1/2 PUBLISH only when
// the subscribers' copies are in the store (and on disk with fsync).
func (h *storeHook) afterCommit(fn func()) {
	select {
	case <-h.done:
		fn()
		return
	default:
	}
	select {
	case h.ops <- storeOp{after: fn}:
	case <-h.done:
		fn()
	}
}

func (h *storeHook) enqueue(op storeOp) {
	if len(op.key) == 0 || len(op.key) > kvlog.MaxKey || len(op.value) > kvlog.MaxValue {
		h.errLog.warn("store: in-flight record too large to store, kept in memory only", "key", logKey(op.key), "key_bytes", len(op.key), "value_bytes", len(op.value))
		return
	}
	select {
	case <-h.done:
		return // stopped: the engine is shutting down
	default:
	}
	select {
	case h.ops <- op:
	case <-h.done:
	}
}

// StoredInflightMessages loads the in-flight messages at start. A client's
// QoS 2 exchange stored by an earlier version under the key of the
// server's messages (inflightKeyOf) moves to its own key, so completing
// it later removes it.
func (h *storeHook) StoredInflightMessages() ([]storage.Message, error) {
	h.inflightMu.Lock()
	defer h.inflightMu.Unlock()
	var v []storage.Message
	var rekey []kvlog.Op
	err := h.inflight.Each(func(k string, b []byte) error {
		var m storage.Message
		if err := decodeInflight(b, &m); err != nil {
			h.log.Warn("store: skipping unreadable in-flight message", "key", k, "error", err)
			return nil
		}
		if pk := m.ToPacket(); mqttcore.ClientExchange(&pk) && !strings.HasSuffix(k, inboundKeySuffix) {
			rekey = append(rekey, kvlog.Op{Key: k + inboundKeySuffix, Value: bytes.Clone(b)}, kvlog.Op{Key: k})
		}
		v = append(v, m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: read in-flight messages: %w", err)
	}
	if len(rekey) > 0 {
		if err := h.inflight.Write(rekey); err != nil {
			return nil, fmt.Errorf("store: move %d QoS 2 exchanges of clients to their own keys: %w", len(rekey)/2, err)
		}
	}
	return v, nil
}

// sync waits until every queued operation is written.
func (h *storeHook) sync() {
	ch := make(chan struct{})
	select {
	case h.flush <- ch:
		<-ch
	case <-h.done:
	}
}

// writer applies queued operations in batches until Stop.
func (h *storeHook) writer() {
	defer h.wg.Done()
	batch := make([]storeOp, 0, groupCommitMax)
	records := make([]kvlog.Op, 0, groupCommitMax)
	commit := func() {
		if len(batch) == 0 {
			return
		}
		for _, op := range batch {
			if op.after == nil {
				records = append(records, kvlog.Op{Key: op.key, Value: op.value})
			}
		}
		// Only each key's last operation reaches the file (kvlog): a
		// message its subscriber acknowledged before the batch was
		// written (the common case with a subscriber that keeps up)
		// costs nothing.
		h.inflightMu.Lock()
		err := h.inflight.Write(records)
		h.inflightMu.Unlock()
		if err != nil {
			h.errLog.warn("store: in-flight records not written", "records", len(records), "error", err)
		}
		for _, op := range batch {
			if op.after != nil {
				op.after()
			}
		}
		clear(batch) // drop references to payloads and callbacks
		batch = batch[:0]
		clear(records)
		records = records[:0]
	}
	for {
		select {
		case op := <-h.ops:
			// Group commit without a timer: take what is queued now (what
			// arrived while the previous batch was written) and write it at
			// once. Under load batches grow by themselves; a lone message
			// waits for one write, not for a window (it waited 2 ms).
			batch = append(batch, op)
		gather:
			for len(batch) < groupCommitMax {
				select {
				case op := <-h.ops:
					batch = append(batch, op)
				default:
					break gather
				}
			}
			commit()
		case ch := <-h.flush:
			h.drain(&batch)
			commit()
			close(ch)
		case <-h.done:
			h.drain(&batch)
			commit()
			return
		}
	}
}

// logKey shortens a store key for logs.
func logKey(k string) string {
	if len(k) > 80 {
		return k[:80] + fmt.Sprintf("... (%d bytes)", len(k))
	}
	return k
}

func (h *storeHook) drain(batch *[]storeOp) {
	for {
		select {
		case op := <-h.ops:
			*batch = append(*batch, op)
		default:
			return
		}
	}
}

// Stop flushes and closes both stores. mochi calls it from Server.Close.
func (h *storeHook) Stop() error {
	var errs []error
	h.stop.Do(func() {
		close(h.done)
		h.wg.Wait()
		if err := h.inflight.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close in-flight store: %w", err))
		}
		if err := h.Hook.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("store: close store: %w", err))
		}
	})
	return errors.Join(errs...)
}
