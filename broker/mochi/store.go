package mochi

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/hooks/storage"
	"github.com/iotq/iotq/internal/mqttcore/hooks/storage/bolt"
	"github.com/iotq/iotq/internal/mqttcore/packets"
	"go.etcd.io/bbolt"
)

// storeHook persists sessions, subscriptions and retained messages through
// mochi's bolt hook (STATE_DIR/store.db; low rate), and in-flight QoS 1/2
// messages through its own bbolt file (STATE_DIR/inflight.db) with group
// commit: operations are queued and written by one goroutine in batches
// (one transaction per batch: whatever was queued while the previous
// transaction ran), instead of one transaction per message. The queue is
// flushed on Stop. Records are binary (storecodec.go); JSON records of
// earlier versions are still read.
//
// It also fixes a bug of mochi v2.7.9's storage hooks, which do not save the
// packet identifier of in-flight messages (after a restart all messages of
// a session had identifier 0 and overwrote each other).
//
// Durability: a QoS 1/2 PUBLISH is acknowledged only after the in-flight
// copies it produced are committed (afterCommit; the group commit still
// batches, the acknowledgements wait for their batch), so a crash loses no
// acknowledged message: a commit reaches the OS (and the disk with fsync)
// before the PUBACK leaves.
type storeHook struct {
	*bolt.Hook

	log    *slog.Logger
	errLog *rateLimitedLog // per-message problems
	db     *bbolt.DB
	ops    chan storeOp
	flush  chan chan struct{}
	done   chan struct{}
	wg     sync.WaitGroup
	stop   sync.Once
}

const (
	inflightBucket = "inflight"
	groupCommitMax = 4096
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
	db, err := bbolt.Open(inflightPath, 0o600, &bo)
	if err != nil {
		return nil, nil, fmt.Errorf("broker: open store %s: %w (is another broker using this state directory?)", inflightPath, err)
	}
	if err := db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(inflightBucket))
		return err
	}); err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("broker: init store %s: %w", inflightPath, err)
	}
	h := &storeHook{
		Hook:   new(bolt.Hook),
		log:    log,
		errLog: newRateLimitedLog(log, time.Second),
		db:     db,
		ops:    make(chan storeOp, 8192),
		flush:  make(chan chan struct{}),
		done:   make(chan struct{}),
	}
	h.wg.Add(1)
	go h.writer()
	bo2 := bo
	return h, &bolt.Options{Path: path, Bucket: "iotq", Options: &bo2}, nil
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
	if len(op.key) == 0 || len(op.key) > bbolt.MaxKeySize || len(op.value) > bbolt.MaxValueSize {
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
	var v []storage.Message
	rekey := map[string]string{}
	err := h.db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket([]byte(inflightBucket)).ForEach(func(k, b []byte) error {
			var m storage.Message
			if err := decodeInflight(b, &m); err != nil {
				h.log.Warn("store: skipping unreadable in-flight message", "key", string(k), "error", err)
				return nil
			}
			if pk := m.ToPacket(); mqttcore.ClientExchange(&pk) && !strings.HasSuffix(string(k), inboundKeySuffix) {
				rekey[string(k)] = string(k) + inboundKeySuffix
			}
			v = append(v, m)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: read in-flight messages: %w", err)
	}
	if len(rekey) > 0 {
		err = h.db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket([]byte(inflightBucket))
			for old, renamed := range rekey {
				val := bytes.Clone(b.Get([]byte(old))) // Get's bytes are the file's pages
				if err := b.Put([]byte(renamed), val); err != nil {
					return err
				}
				if err := b.Delete([]byte(old)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("store: move %d QoS 2 exchanges of clients to their own keys: %w", len(rekey), err)
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
	// last maps each key of the batch to its last operation there: only
	// that one reaches the store. A message its subscriber acknowledged
	// before the batch was committed (the common case with a subscriber
	// that keeps up) costs a lookup instead of a put and a delete: the
	// store was a third of the broker's CPU at 1 -> 20 QoS 1.
	last := make(map[string]int, groupCommitMax)
	superseded := func(i int) bool { return last[batch[i].key] != i }
	commit := func() {
		if len(batch) == 0 {
			return
		}
		clear(last)
		for i, op := range batch {
			if op.after == nil {
				last[op.key] = i
			}
		}
		err := h.db.Update(func(tx *bbolt.Tx) error {
			b := tx.Bucket([]byte(inflightBucket))
			for i, op := range batch {
				if op.after != nil || superseded(i) {
					continue
				}
				if err := op.apply(b); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			// One bad record must not cost the others theirs: write
			// them one transaction each and report only the bad ones.
			for i, op := range batch {
				if op.after != nil || superseded(i) {
					continue
				}
				if err := h.db.Update(func(tx *bbolt.Tx) error { return op.apply(tx.Bucket([]byte(inflightBucket))) }); err != nil {
					h.errLog.warn("store: in-flight record not written", "key", logKey(op.key), "error", err)
				}
			}
		}
		for _, op := range batch {
			if op.after != nil {
				op.after()
			}
		}
		clear(batch) // drop references to payloads and callbacks
		batch = batch[:0]
	}
	for {
		select {
		case op := <-h.ops:
			// Group commit without a timer: take what is queued now (what
			// arrived while the previous transaction ran) and commit it at
			// once. Under load batches grow by themselves; a lone message
			// waits for one commit, not for a window (it waited 2 ms).
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

func (op storeOp) apply(b *bbolt.Bucket) error {
	if op.value == nil {
		return b.Delete([]byte(op.key))
	}
	return b.Put([]byte(op.key), op.value)
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
		if err := h.db.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close in-flight store: %w", err))
		}
		if err := h.Hook.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("store: close store: %w", err))
		}
	})
	return errors.Join(errs...)
}
