package engine

import "time"

// Message is a message of the topic space, as seen by local fronts (the
// CoAP front, Server.Publish and Server.Subscribe).
type Message struct {
	Topic   string
	Payload []byte
	QoS     byte
	Retain  bool
}

// Slow-consumer policies (FlowOptions.SlowConsumer).
const (
	// PolicyDrop waits up to MaxStall for a full subscriber queue, then drops
	// QoS 0 messages for that subscriber (counted and logged). QoS 1/2
	// messages are never dropped: after MaxStall the slow subscriber is
	// disconnected and its session keeps them for redelivery.
	PolicyDrop = "drop"
	// PolicyDisconnect disconnects a subscriber whose queue stays full for
	// MaxStall, whatever the QoS.
	PolicyDisconnect = "disconnect"
)

// FlowOptions set queue sizes and the slow-consumer policy.
type FlowOptions struct {
	// QueueLength is the outbound queue of each client, in messages.
	// Default 512.
	QueueLength int `yaml:"queue_length"`
	// SlowConsumer is PolicyDrop (default) or PolicyDisconnect.
	SlowConsumer string `yaml:"slow_consumer"`
	// MaxStall is how long a publisher is held back (TCP backpressure) while
	// a subscriber's queue is more than half full. Default 2s.
	MaxStall time.Duration `yaml:"max_stall"`
	// MaxInflight bounds unacknowledged QoS 1/2 messages stored per client.
	// Default 65535 (the packet identifier space).
	MaxInflight int `yaml:"max_inflight"`
	// MaxPacketSize is the largest MQTT packet accepted, in bytes. Default
	// 16 MiB.
	MaxPacketSize int `yaml:"max_packet_size"`
	// WriteBuffer is the size in bytes at which a client's pending writes
	// are flushed (the buffer exists only while writes are pending).
	// Default 16 KiB.
	WriteBuffer int `yaml:"write_buffer"`
	// ReadBuffer is each client's read buffer in bytes. Default 4 KiB.
	ReadBuffer int `yaml:"read_buffer"`
	// WriteTimeout disconnects a client when one write to it has been
	// blocked this long (the peer stopped reading, or the link is dead); its
	// session keeps its QoS 1/2 messages. Default 30s, generous enough for
	// retransmission timeouts on lossy satellite links.
	WriteTimeout time.Duration `yaml:"write_timeout"`
	// ParkIdleAfter is how long a client on a plain TCP listener (mqtt://)
	// or a multi-stream QUIC listener (quic://, the default) may send
	// nothing before it gives up its goroutine (its socket waits in the
	// engine's epoll poller; a QUIC connection wakes it when data comes;
	// Linux only): an idle client then costs no goroutine stack of the
	// engine's. Default 100ms; negative (e.g. -1s): never.
	ParkIdleAfter time.Duration `yaml:"park_idle_after"`
	// NoBackpressure turns off holding publishers back while a subscriber's
	// queue is full: the engine's original behaviour (QoS 0 messages are
	// dropped as soon as a queue is full). For comparisons only.
	NoBackpressure bool `yaml:"no_backpressure"`
}

// LimitsOptions bound what one client may ask of the broker.
type LimitsOptions struct {
	// MaxClientIDLength is the longest client identifier accepted, in
	// bytes; a longer one is refused with CONNACK "client identifier not
	// valid". Default 256.
	MaxClientIDLength int `yaml:"max_client_id_length"`
	// MaxKeepAlive, if set, is the longest keep-alive a client may use (whole
	// seconds, at most 65535s), like Mosquitto's max_keepalive: an MQTT 5
	// client asking for more (or for none, 0) is told this value as the
	// server keep-alive in CONNACK; an MQTT 3.1.1 client, which cannot be
	// told, is refused with "identifier rejected". Default 0: no limit.
	MaxKeepAlive time.Duration `yaml:"max_keep_alive"`
	// MaxSubscriptions bounds the subscriptions of one client; one more is
	// refused (SUBACK 0x97 quota exceeded; 0x80 in MQTT 3.1.1) and counted
	// in iotq_broker_refused_total{kind="subscription_limit"}. Default
	// 1000.
	MaxSubscriptions int `yaml:"max_subscriptions"`
	// MaxQueuedBytes bounds what the messages one client's session holds
	// for delivery cost: payload, topic, properties and the engine's
	// structure around each (176 bytes in flight, 920 for a queued QoS 0
	// message; mqttcore.QueuedCost), for QoS 1/2 messages not yet
	// acknowledged (sent or waiting; for an offline session everything
	// queued for it) plus QoS 0 messages waiting in its outbound queue.
	// A publisher is held back
	// (at most max_stall without progress) while a connected subscriber
	// drains; a message for an offline or stalled session that would take
	// it past the limit is not delivered to it and is counted in
	// iotq_broker_messages_dropped_total{reason="queued_bytes"}. A message
	// larger than the limit still fits an empty session. Default 8 MiB;
	// -1: no limit.
	MaxQueuedBytes int `yaml:"max_queued_bytes"`
}
