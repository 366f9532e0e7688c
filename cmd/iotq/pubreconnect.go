package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/iotq/iotq/client"
	"github.com/iotq/iotq/client/measure"
	"github.com/iotq/iotq/records"
)

// pubReconnect is what `iotq pub --reconnect` gives measure.Publisher: a
// dial with the same flags (cf.clientID is the first connection's by the
// time it runs), bounded by --timeout, and one line on standard error per
// reconnection.
func (a *app) pubReconnect(_ context.Context, cf *clientFlags, timeout time.Duration) *measure.Reconnect {
	return &measure.Reconnect{
		Within: timeout,
		Redial: func(ctx context.Context) (client.Client, error) {
			c, _, err := connect(ctx, cf, timeout, nil)
			if ee := (*exitError)(nil); errors.As(err, &ee) {
				err = errors.New(ee.msg)
			}
			return c, err
		},
		OnEvent: func(ev measure.ReconnectEvent) {
			if ev.Err != nil {
				fmt.Fprintf(a.stderr, "iotq pub: connection lost (%v); gave up: %v\n", ev.Cause, ev.Err)
				return
			}
			fmt.Fprintf(a.stderr, "iotq pub: connection lost (%v); reconnected after %s (%d attempts, tls resumed %v), %d messages published again\n",
				ev.Cause, ev.Connected.Sub(ev.Lost).Round(time.Millisecond), ev.Attempts, ev.Info.TLSResumed, ev.Resent)
		},
	}
}

// reconnected counts the reconnections that made a new connection.
func reconnected(evs []measure.ReconnectEvent) int {
	n := 0
	for _, ev := range evs {
		if ev.Err == nil {
			n++
		}
	}
	return n
}

// reconnectEvents are the --stats json form of the reconnections.
func reconnectEvents(evs []measure.ReconnectEvent) []records.ReconnectEvent {
	var out []records.ReconnectEvent
	for _, ev := range evs {
		e := records.ReconnectEvent{LostNs: records.UnixNs(ev.Lost), ConnectedNs: records.UnixNs(ev.Connected),
			Attempts: ev.Attempts, Resent: ev.Resent, TLSResumed: ev.Info.TLSResumed}
		if ev.Cause != nil {
			e.Cause = ev.Cause.Error()
		}
		if ev.Err == nil {
			e.Ms = float64(ev.Connected.Sub(ev.Lost).Nanoseconds()) / 1e6
		} else {
			e.Cause += "; gave up: " + ev.Err.Error()
		}
		out = append(out, e)
	}
	return out
}
