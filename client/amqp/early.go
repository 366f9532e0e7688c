package amqp

import (
	"context"
	"fmt"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/iotq/iotq/transport"
)

// pipeline writes the first flight of a pipelined start on tc (one write:
// over QUIC with a ticket it leaves as 0-RTT data) and returns the conn
// go-amqp runs on.
func (c *client) pipeline(tc transport.Conn, es *earlyStart) (*pipeConn, error) {
	units, err := es.flight()
	if err != nil {
		return nil, fmt.Errorf("encode the pipelined start: %w", err)
	}
	var flight []byte
	for _, u := range units {
		flight = append(flight, u.raw...)
	}
	pc := newPipeConn(tc, units)
	pc.swallowed = func(name string) {
		c.o.Logger.Debug("amqp: go-amqp's copy of a pipelined frame swallowed", "frame", name)
	}
	pc.onTransfer = c.firstTransfer
	if _, err := tc.Write(flight); err != nil {
		return nil, fmt.Errorf("write the pipelined start (%d bytes): %w", len(flight), err)
	}
	c.o.Logger.Debug("amqp: pipelined start written", "bytes", len(flight), "frames", len(units), "sasl", es.sasl)
	return pc, nil
}

// finishEarly lets go-amqp attach the early sender link (pipeConn
// swallows its attach, the flight carried it) and sends the early message
// as go-amqp's first transfer, once the broker's begin and flow granted
// the session window and link credit: one round trip after the flight.
// The receipt completes as a Publish's does (QoS 1: on the broker's
// disposition; QoS 0: when written).
func (c *client) finishEarly(ctx context.Context, pc *pipeConn, es *earlyStart) error {
	s, err := c.session.NewSender(ctx, es.address, &goamqp.SenderOptions{
		SettlementMode: goamqp.SenderSettleModeMixed.Ptr(), Name: es.linkName})
	if err != nil {
		return fmt.Errorf("attach sender to %q: %w", es.address, err)
	}
	if left := pc.pending(); len(left) > 0 {
		return fmt.Errorf("go-amqp did not write %v of the pipelined start", left)
	}
	now := time.Now()
	c.mu.Lock()
	c.senders[es.address] = s
	c.info.LinkAttached = now
	c.mu.Unlock()
	msg := &goamqp.Message{Data: [][]byte{es.payload}, Properties: &goamqp.MessageProperties{To: &es.address}, DeliveryTag: es.tag}
	qos := byte(1)
	if es.settled {
		qos = 0
	}
	if err := c.transfer(ctx, s, es.address, msg, qos, c.o.Early.Complete); err != nil {
		return fmt.Errorf("early transfer: %w", err)
	}
	c.mu.Lock()
	c.info.EarlySent = c.info.FirstTransfer
	sent, start := c.info.EarlySent, c.info.DialStart
	c.mu.Unlock()
	c.o.Logger.Debug("amqp: early message sent", "address", es.address, "qos", qos,
		"after_dial_ms", float64(sent.Sub(start).Microseconds())/1e3)
	return nil
}
