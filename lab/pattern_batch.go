package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/iotq/iotq/records"
)

// The batch patterns (E8) and closed-loop (E7): a batch on a connection of
// its own per repetition, or one message after the other's receipt.

// sessionCache is the cell's ticket file of the batch-resume pattern: each
// repetition's publisher resumes the session of the one before.
func (cr *cellRun) sessionCache() string { return filepath.Join(cr.dir, "session-cache") }

// repBatch runs one repetition of pattern batch (E8): the subscriber
// connects and waits; the publisher opens a fresh connection and sends the
// cell's messages back to back at its QoS, waits for every receipt and
// exits. With batch-resume the publisher keeps its TLS session ticket /
// QUIC 0-RTT ticket in the cell's session cache, primed before the first
// repetition by a one-message connection that is not measured.
func (cr *cellRun) repBatch(ctx context.Context, rep int, repDir, base string) error {
	topic := base + "/m"
	deadline := 2*cr.handshakeAllowance() + time.Duration(cr.c.Messages)*(cr.rtt()+50*time.Millisecond) + cr.grace()
	args := cr.pubArgs(NodePub, fmt.Sprintf("lab-pub-%d", rep), topic, filepath.Join(repDir, "pub.csv"), cr.c.Messages, 0)
	if cr.c.Pattern == PatternClosedLoop {
		// a message may wait through every retransmission (CoAP's
		// MAX_TRANSMIT_WAIT is 93 s); bound the run by a generous average
		deadline = 2*cr.handshakeAllowance() + time.Duration(cr.c.Messages)*(cr.rtt()+10*time.Second) + cr.grace()
		args.ClosedLoop = true
	}
	if cr.c.Pattern == PatternBatchResume {
		args.SessionCache = cr.sessionCache()
		if rep == 1 {
			if err := cr.primeSession(ctx, repDir); err != nil {
				return err
			}
		}
	}
	var echo *child // batch-echo: the sender's second connection, receiving the echoes
	var subEdit []func(*SubArgs)
	if cr.c.Pattern == PatternBatchEcho {
		var err error
		echo, err = cr.startSubOn(ctx, NodePub, records.RoleEcho, "echo", rep, repDir, base+"/echo", cr.c.Messages, deadline+10*time.Second, spawnOpts{})
		if err != nil {
			return err
		}
		subEdit = append(subEdit, func(a *SubArgs) { a.Echo = base + "/echo" })
	}
	sub, err := cr.startSub(ctx, rep, repDir, topic, cr.c.Messages, deadline+10*time.Second, spawnOpts{}, subEdit...)
	if err != nil {
		echo.stop(3 * time.Second)
		return err
	}
	pub, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodePub, records.RolePub, repDir, "pub", args.Argv(), spawnOpts{})
	if err != nil {
		sub.stop(3 * time.Second)
		echo.stop(3 * time.Second)
		return err
	}
	var runErr error
	if !pub.wait(ctx, deadline) {
		runErr = fmt.Errorf("publisher did not finish within %s", deadline)
	}
	pub.stop(3 * time.Second)
	if runErr == nil && pub.waitErr != nil && !cr.allAttempted(repDir) {
		// closed-loop: messages that ran out of retransmissions make pub
		// exit 1; they are recorded as lost, the run is complete
		runErr = pub.failure()
	}
	sub.wait(ctx, cr.grace())
	sub.stop(5 * time.Second)
	if echo != nil {
		echo.wait(ctx, cr.grace())
		echo.stop(5 * time.Second)
		cr.cpuRow(rep, echo)
	}
	cr.cpuRow(rep, pub)
	cr.cpuRow(rep, sub)
	if err := cr.collect(rep, repDir, []pubRun{{file: "pub.csv", stats: "pub.stdout", role: records.RolePub, topic: topic}}, sub); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// allAttempted reports whether a closed-loop publisher recorded every
// message of the cell (acknowledged or failed).
func (cr *cellRun) allAttempted(repDir string) bool {
	if cr.c.Pattern != PatternClosedLoop {
		return false
	}
	rows, err := readNodeRecords[records.PubRecord](filepath.Join(repDir, "pub.csv"))
	return err == nil && len(rows) == cr.c.Messages
}

// primeSession runs one unmeasured publisher connection that leaves a
// session ticket in the cell's session cache (files prime.* in repDir).
func (cr *cellRun) primeSession(ctx context.Context, repDir string) error {
	deadline := cr.handshakeAllowance() + cr.grace()
	args := cr.pubArgs(NodePub, "lab-pub-prime", "lab/0/prime", filepath.Join(repDir, "prime.csv"), 1, 0)
	args.SessionCache = cr.sessionCache()
	p, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodePub, records.RolePub, repDir, "prime", args.Argv(), spawnOpts{})
	if err != nil {
		return err
	}
	ok := p.wait(ctx, deadline)
	p.stop(3 * time.Second)
	switch {
	case !ok:
		return fmt.Errorf("priming the session cache: no exit within %s", deadline)
	case p.waitErr != nil:
		return fmt.Errorf("priming the session cache: %w", p.failure())
	}
	return nil
}
