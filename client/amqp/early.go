package amqp

import (
	"context"
	"errors"
	"fmt"
	"time"

	goamqp "github.com/Azure/go-amqp"

	"github.com/iotq/iotq/client/internal/core"
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
	var onState func(any)
	if !es.settled {
		c.earlyState = make(chan any, 1)
		onState = func(state any) { c.earlyState <- state }
	}
	pc := newPipeConn(tc, units, es.settled, onState)
	pc.swallowed = func(name string) {
		c.o.Logger.Debug("amqp: go-amqp's copy of a pipelined frame swallowed", "frame", name)
	}
	if _, err := tc.Write(flight); err != nil {
		return nil, fmt.Errorf("write the pipelined start (%d bytes): %w", len(flight), err)
	}
	now := time.Now()
	c.info.EarlySent, c.info.FirstTransfer = now, now
	c.o.Logger.Debug("amqp: pipelined start written", "bytes", len(flight), "frames", len(units), "settled", es.settled)
	return pc, nil
}

// finishEarly lets go-amqp attach the early sender link and send the early
// message, whose frames pipeConn swallows: go-amqp's link and delivery
// counters then match what the broker saw.
func (c *client) finishEarly(ctx context.Context, pc *pipeConn, es *earlyStart) error {
	s, err := c.session.NewSender(ctx, es.address, &goamqp.SenderOptions{
		SettlementMode: goamqp.SenderSettleModeMixed.Ptr(), Name: es.linkName})
	if err != nil {
		return fmt.Errorf("attach sender to %q: %w", es.address, err)
	}
	c.senders[es.address] = s
	c.info.LinkAttached = time.Now()
	// go-amqp's copy is pre-settled: it waits for no disposition (the one
	// that comes is read by pipeConn), and the copy never leaves.
	msg := &goamqp.Message{Data: [][]byte{es.payload}, Properties: &goamqp.MessageProperties{To: &es.address}, DeliveryTag: es.tag}
	if err := s.Send(ctx, msg, &goamqp.SendOptions{Settled: true}); err != nil {
		return fmt.Errorf("early transfer to %q: %w", es.address, err)
	}
	if left := pc.pending(); len(left) > 0 {
		return fmt.Errorf("go-amqp did not write %v of the pipelined start", left)
	}
	if es.settled {
		c.o.Early.Complete(c.info.EarlySent, nil)
	}
	return nil
}

// waitEarly completes the early receipt with the broker's disposition.
func (c *client) waitEarly() {
	defer c.wg.Done()
	t := time.NewTimer(c.o.AckTimeout)
	defer t.Stop()
	select {
	case state := <-c.earlyState:
		c.o.Early.Complete(time.Now(), earlyOutcome(state))
	case <-c.ctx.Done():
		c.o.Early.Complete(time.Time{}, core.ErrClosed)
	case <-c.done:
		err := c.Err()
		if err == nil || errors.Is(err, core.ErrClosed) {
			err = core.ErrClosed
		}
		c.o.Early.Complete(time.Time{}, err)
	case <-t.C:
		c.o.Early.Complete(time.Time{}, fmt.Errorf("no disposition of the early message within %s", c.o.AckTimeout))
	}
}
