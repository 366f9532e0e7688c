// SPDX-License-Identifier: MIT
// SPDX-FileCopyrightText: 2022 mochi-mqtt, mochi-co
// SPDX-FileContributor: mochi-co, werbenhu

// Package bolt is provided for historical compatibility and may not be actively updated, you should use the badger hook instead.
package bolt

import (
	"bytes"
	"errors"
	"time"

	"github.com/iotq/iotq/internal/mqttcore"
	"github.com/iotq/iotq/internal/mqttcore/hooks/storage"
	"github.com/iotq/iotq/internal/mqttcore/packets"
	"github.com/iotq/iotq/internal/mqttcore/system"
	"go.etcd.io/bbolt"
)

var (
	ErrBucketNotFound = errors.New("bucket not found")
	ErrKeyNotFound    = errors.New("key not found")
)

const (
	// defaultDbFile is the default file path for the boltdb file.
	defaultDbFile = ".bolt"

	// defaultTimeout is the default time to hold a connection to the file.
	defaultTimeout = 250 * time.Millisecond

	defaultBucket = "mochi"
)

// clientKey returns a primary key for a client.
func clientKey(cl *mqttcore.Client) string {
	return storage.ClientKey + "_" + cl.ID
}

// subscriptionKey returns a primary key for a subscription.
func subscriptionKey(cl *mqttcore.Client, filter string) string {
	return storage.SubscriptionKey + "_" + cl.ID + ":" + filter
}

// retainedKey returns a primary key for a retained message.
func retainedKey(topic string) string {
	return storage.RetainedKey + "_" + topic
}

// inflightKey returns a primary key for an inflight message.
func inflightKey(cl *mqttcore.Client, pk packets.Packet) string {
	if mqttcore.ClientExchange(&pk) { // the client's own identifier space [iotq patch 56]
		return storage.InflightKey + "_" + cl.ID + ":" + pk.FormatID() + ":in"
	}
	return storage.InflightKey + "_" + cl.ID + ":" + pk.FormatID()
}

// sysInfoKey returns a primary key for system info.
func sysInfoKey() string {
	return storage.SysInfoKey
}

// Options contains configuration settings for the bolt instance.
type Options struct {
	Options *bbolt.Options
	Bucket  string `yaml:"bucket" json:"bucket"`
	Path    string `yaml:"path" json:"path"`
}

// Hook is a persistent storage hook based using boltdb file store as a backend.
type Hook struct {
	mqttcore.HookBase
	config *Options  // options for configuring the boltdb instance.
	db     *bbolt.DB // the boltdb instance.
}

// ID returns the id of the hook.
func (h *Hook) ID() string {
	return "bolt-db"
}

// Provides indicates which hook methods this hook provides.
func (h *Hook) Provides(b byte) bool {
	return bytes.Contains([]byte{
		mqttcore.OnSessionEstablished,
		mqttcore.OnDisconnect,
		mqttcore.OnSubscribed,
		mqttcore.OnUnsubscribed,
		mqttcore.OnRetainMessage,
		mqttcore.OnWillSent,
		mqttcore.OnQosPublish,
		mqttcore.OnQosComplete,
		mqttcore.OnQosDropped,
		mqttcore.OnSysInfoTick,
		mqttcore.OnClientExpired,
		mqttcore.OnRetainedExpired,
		mqttcore.StoredClients,
		mqttcore.StoredInflightMessages,
		mqttcore.StoredRetainedMessages,
		mqttcore.StoredSubscriptions,
		mqttcore.StoredSysInfo,
	}, []byte{b})
}

// Init initializes and connects to the boltdb instance.
func (h *Hook) Init(config any) error {
	if _, ok := config.(*Options); !ok && config != nil {
		return mqttcore.ErrInvalidConfigType
	}

	if config == nil {
		config = new(Options)
	}

	h.config = config.(*Options)
	if h.config.Options == nil {
		h.config.Options = &bbolt.Options{
			Timeout: defaultTimeout,
		}
	}
	if len(h.config.Path) == 0 {
		h.config.Path = defaultDbFile
	}

	if len(h.config.Bucket) == 0 {
		h.config.Bucket = defaultBucket
	}

	var err error
	h.db, err = bbolt.Open(h.config.Path, 0600, h.config.Options)
	if err != nil {
		return err
	}

	err = h.db.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists([]byte(h.config.Bucket))
		return err
	})
	return err
}

// Stop closes the boltdb instance.
func (h *Hook) Stop() error {
	err := h.db.Close()
	h.db = nil
	return err
}

// OnSessionEstablished adds a client to the store when their session is established.
func (h *Hook) OnSessionEstablished(cl *mqttcore.Client, pk packets.Packet) {
	h.updateClient(cl)
}

// OnWillSent is called when a client sends a Will Message and the Will Message is removed from the client record.
func (h *Hook) OnWillSent(cl *mqttcore.Client, pk packets.Packet) {
	h.updateClient(cl)
}

// updateClient writes the client data to the store.
func (h *Hook) updateClient(cl *mqttcore.Client) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}

	props := cl.Properties.Props.Copy(false)
	in := &storage.Client{
		ID:              cl.ID,
		T:               storage.ClientKey,
		Remote:          cl.Net.Remote,
		Listener:        cl.Net.Listener,
		Username:        cl.Properties.Username,
		Clean:           cl.Properties.Clean,
		ProtocolVersion: cl.Properties.ProtocolVersion,
		Properties: storage.ClientProperties{
			SessionExpiryInterval: props.SessionExpiryInterval,
			AuthenticationMethod:  props.AuthenticationMethod,
			AuthenticationData:    props.AuthenticationData,
			RequestProblemInfo:    props.RequestProblemInfo,
			RequestResponseInfo:   props.RequestResponseInfo,
			ReceiveMaximum:        props.ReceiveMaximum,
			TopicAliasMaximum:     props.TopicAliasMaximum,
			User:                  props.User,
			MaximumPacketSize:     props.MaximumPacketSize,
		},
		Will: storage.ClientWill(cl.Properties.Will),
	}

	_ = h.setKv(clientKey(cl), in)
}

// OnDisconnect removes a client from the store if they were using a clean session.
func (h *Hook) OnDisconnect(cl *mqttcore.Client, _ error, expire bool) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}

	if !expire {
		return
	}

	if cl.StopCause() == packets.ErrSessionTakenOver {
		return
	}

	_ = h.delKv(clientKey(cl))
}

// OnSubscribed adds one or more client subscriptions to the store.
//
// [iotq patch 24] In one transaction per SUBSCRIBE (upstream: one per
// filter, so 600 clients subscribing to 1000 filters each allocated 40 GB
// in bbolt and took the broker's RSS to 1.6 GB), only the filters granted
// (upstream stored refused ones too, with the reason code as their QoS,
// and restored them as subscriptions after a restart), and nothing for a
// session that ends with its connection (a clean session has nothing to
// restore).
func (h *Hook) OnSubscribed(cl *mqttcore.Client, pk packets.Packet, reasonCodes []byte) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}

	if neverPersistent(cl) {
		return
	}

	kvs := make([]kv, 0, len(pk.Filters))
	for i := 0; i < len(pk.Filters) && i < len(reasonCodes); i++ {
		if reasonCodes[i] >= packets.ErrUnspecifiedError.Code {
			continue
		}
		in := &storage.Subscription{
			ID:                subscriptionKey(cl, pk.Filters[i].Filter),
			T:                 storage.SubscriptionKey,
			Client:            cl.ID,
			Qos:               reasonCodes[i],
			Filter:            pk.Filters[i].Filter,
			Identifier:        pk.Filters[i].Identifier,
			NoLocal:           pk.Filters[i].NoLocal,
			RetainHandling:    pk.Filters[i].RetainHandling,
			RetainAsPublished: pk.Filters[i].RetainAsPublished,
		}
		data, _ := in.MarshalBinary()
		kvs = append(kvs, kv{k: in.ID, v: data})
	}
	h.updateKvs(kvs)
}

// OnUnsubscribed removes one or more client subscriptions from the store.
//
// [iotq patch 24] In one transaction (upstream: one per filter, also for
// the whole session at a clean disconnect). Deletes are not skipped for a
// session that ends with its connection: it may have inherited stored
// subscriptions, or become one at DISCONNECT.
func (h *Hook) OnUnsubscribed(cl *mqttcore.Client, pk packets.Packet) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}

	kvs := make([]kv, 0, len(pk.Filters))
	for i := 0; i < len(pk.Filters); i++ {
		kvs = append(kvs, kv{k: subscriptionKey(cl, pk.Filters[i].Filter)})
	}
	h.updateKvs(kvs)
}

// neverPersistent reports whether cl's session ends with its connection
// and never was one that outlives it: MQTT 3.1.1 clean session, or MQTT 5
// without a session expiry interval (a CONNECT with expiry 0 may not raise
// it at DISCONNECT; one that set it, even to 0, is not counted here, as
// its expiry may have been lowered at DISCONNECT). [iotq patch 24]
func neverPersistent(cl *mqttcore.Client) bool {
	if cl.Properties.ProtocolVersion == 5 {
		return !cl.Properties.Props.SessionExpiryIntervalFlag && cl.Properties.Props.SessionExpiryInterval == 0
	}
	return cl.Properties.Clean
}

// kv is a record to write, or with v nil to delete. [iotq patch 24]
type kv struct {
	k string
	v []byte
}

// updateKvs applies kvs in one transaction. Should it fail (a key the
// store refuses, e.g. longer than bbolt's 32 KiB), they are applied one
// transaction each, so only the bad ones are lost. [iotq patch 24]
func (h *Hook) updateKvs(kvs []kv) {
	if len(kvs) == 0 {
		return
	}
	apply := func(b *bbolt.Bucket, r kv) error {
		if r.v == nil {
			return b.Delete([]byte(r.k))
		}
		return b.Put([]byte(r.k), r.v)
	}
	err := h.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket([]byte(h.config.Bucket))
		for _, r := range kvs {
			if err := apply(b, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		return
	}
	for _, r := range kvs {
		if err := h.db.Update(func(tx *bbolt.Tx) error { return apply(tx.Bucket([]byte(h.config.Bucket)), r) }); err != nil {
			k := r.k
			if len(k) > 80 {
				k = k[:80] + "..."
			}
			h.Log.Error("failed to update data", "error", err, "key", k, "key_bytes", len(r.k))
		}
	}
}

// OnRetainMessage adds a retained message for a topic to the store.
func (h *Hook) OnRetainMessage(cl *mqttcore.Client, pk packets.Packet, r int64) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}

	if r == -1 {
		_ = h.delKv(retainedKey(pk.TopicName))
		return
	}

	props := pk.Properties.Copy(false)
	in := &storage.Message{
		ID:          retainedKey(pk.TopicName),
		T:           storage.RetainedKey,
		FixedHeader: pk.FixedHeader,
		TopicName:   pk.TopicName,
		Payload:     pk.Payload,
		Created:     pk.Created,
		Client:      cl.ID,
		Origin:      pk.Origin,
		Properties: storage.MessageProperties{
			PayloadFormat:          props.PayloadFormat,
			MessageExpiryInterval:  props.MessageExpiryInterval,
			ContentType:            props.ContentType,
			ResponseTopic:          props.ResponseTopic,
			CorrelationData:        props.CorrelationData,
			SubscriptionIdentifier: props.SubscriptionIdentifier,
			TopicAlias:             props.TopicAlias,
			User:                   props.User,
		},
	}

	_ = h.setKv(in.ID, in)
}

// OnQosPublish adds or updates an inflight message in the store.
func (h *Hook) OnQosPublish(cl *mqttcore.Client, pk packets.Packet, sent int64, resends int) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}

	props := pk.Properties.Copy(false)
	in := &storage.Message{
		ID:          inflightKey(cl, pk),
		T:           storage.InflightKey,
		Client:      cl.ID,
		Origin:      pk.Origin,
		FixedHeader: pk.FixedHeader,
		TopicName:   pk.TopicName,
		Payload:     pk.Payload,
		Sent:        sent,
		Created:     pk.Created,
		Properties: storage.MessageProperties{
			PayloadFormat:          props.PayloadFormat,
			MessageExpiryInterval:  props.MessageExpiryInterval,
			ContentType:            props.ContentType,
			ResponseTopic:          props.ResponseTopic,
			CorrelationData:        props.CorrelationData,
			SubscriptionIdentifier: props.SubscriptionIdentifier,
			TopicAlias:             props.TopicAlias,
			User:                   props.User,
		},
	}

	_ = h.setKv(in.ID, in)
}

// OnQosComplete removes a resolved inflight message from the store.
func (h *Hook) OnQosComplete(cl *mqttcore.Client, pk packets.Packet) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}

	_ = h.delKv(inflightKey(cl, pk))
}

// OnQosDropped removes a dropped inflight message from the store.
func (h *Hook) OnQosDropped(cl *mqttcore.Client, pk packets.Packet) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
	}

	h.OnQosComplete(cl, pk)
}

// OnSysInfoTick stores the latest system info in the store.
func (h *Hook) OnSysInfoTick(sys *system.Info) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}

	in := &storage.SystemInfo{
		ID:   sysInfoKey(),
		T:    storage.SysInfoKey,
		Info: *sys,
	}

	_ = h.setKv(in.ID, in)
}

// OnRetainedExpired deletes expired retained messages from the store.
func (h *Hook) OnRetainedExpired(filter string) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}
	_ = h.delKv(retainedKey(filter))
}

// OnClientExpired deleted expired clients from the store.
func (h *Hook) OnClientExpired(cl *mqttcore.Client) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return
	}
	_ = h.delKv(clientKey(cl))
}

// StoredClients returns all stored clients from the store.
func (h *Hook) StoredClients() (v []storage.Client, err error) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return v, storage.ErrDBFileNotOpen
	}

	err = h.iterKv(storage.ClientKey, func(value []byte) error {
		obj := storage.Client{}
		err = obj.UnmarshalBinary(value)
		if err == nil {
			v = append(v, obj)
		}
		return err
	})
	return v, nil
}

// StoredSubscriptions returns all stored subscriptions from the store.
func (h *Hook) StoredSubscriptions() (v []storage.Subscription, err error) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return v, storage.ErrDBFileNotOpen
	}

	v = make([]storage.Subscription, 0)
	err = h.iterKv(storage.SubscriptionKey, func(value []byte) error {
		obj := storage.Subscription{}
		err = obj.UnmarshalBinary(value)
		if err == nil {
			v = append(v, obj)
		}
		return err
	})
	return
}

// StoredRetainedMessages returns all stored retained messages from the store.
func (h *Hook) StoredRetainedMessages() (v []storage.Message, err error) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return v, storage.ErrDBFileNotOpen
	}

	v = make([]storage.Message, 0)
	err = h.iterKv(storage.RetainedKey, func(value []byte) error {
		obj := storage.Message{}
		err = obj.UnmarshalBinary(value)
		if err == nil {
			v = append(v, obj)
		}
		return err
	})
	return
}

// StoredInflightMessages returns all stored inflight messages from the store.
func (h *Hook) StoredInflightMessages() (v []storage.Message, err error) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return v, storage.ErrDBFileNotOpen
	}

	v = make([]storage.Message, 0)
	err = h.iterKv(storage.InflightKey, func(value []byte) error {
		obj := storage.Message{}
		err = obj.UnmarshalBinary(value)
		if err == nil {
			v = append(v, obj)
		}
		return err
	})
	return
}

// StoredSysInfo returns the system info from the store.
func (h *Hook) StoredSysInfo() (v storage.SystemInfo, err error) {
	if h.db == nil {
		h.Log.Error("", "error", storage.ErrDBFileNotOpen)
		return v, storage.ErrDBFileNotOpen
	}

	err = h.getKv(storage.SysInfoKey, &v)
	if err != nil && !errors.Is(err, ErrKeyNotFound) {
		return
	}

	return v, nil
}

// setKv stores a key-value pair in the database.
func (h *Hook) setKv(k string, v storage.Serializable) error {
	err := h.db.Update(func(tx *bbolt.Tx) error {

		bucket := tx.Bucket([]byte(h.config.Bucket))
		data, _ := v.MarshalBinary()
		err := bucket.Put([]byte(k), data)
		if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		h.Log.Error("failed to upsert data", "error", err, "key", k)
	}
	return err
}

// delKv deletes a key-value pair from the database.
func (h *Hook) delKv(k string) error {
	err := h.db.Update(func(tx *bbolt.Tx) error {
		bucket := tx.Bucket([]byte(h.config.Bucket))
		err := bucket.Delete([]byte(k))
		if err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		h.Log.Error("failed to delete data", "error", err, "key", k)
	}
	return err
}

// getKv retrieves the value associated with a key from the database.
func (h *Hook) getKv(k string, v storage.Serializable) error {
	err := h.db.View(func(tx *bbolt.Tx) error {
		bucket := tx.Bucket([]byte(h.config.Bucket))

		value := bucket.Get([]byte(k))
		if value == nil {
			return ErrKeyNotFound
		}

		return v.UnmarshalBinary(value)
	})
	if err != nil {
		h.Log.Error("failed to get data", "error", err, "key", k)
	}
	return err
}

// iterKv iterates over key-value pairs with keys having the specified prefix in the database.
func (h *Hook) iterKv(prefix string, visit func([]byte) error) error {
	err := h.db.View(func(tx *bbolt.Tx) error {
		bucket := tx.Bucket([]byte(h.config.Bucket))

		c := bucket.Cursor()
		for k, v := c.Seek([]byte(prefix)); k != nil && string(k[:len(prefix)]) == prefix; k, v = c.Next() {
			if err := visit(v); err != nil {
				return err
			}
		}
		return nil
	})

	if err != nil {
		h.Log.Error("failed to iter data", "error", err, "prefix", prefix)
	}
	return err
}
