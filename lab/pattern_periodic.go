package lab

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/iotq/iotq/records"
)

// The periodic pattern (E1-E3): a publisher paced at the cell's interval,
// a subscriber counting what arrives.

func (cr *cellRun) repPeriodic(ctx context.Context, rep int, repDir, base string) error {
	topic := base + "/m"
	sendTime := time.Duration(cr.c.Messages) * cr.c.Interval()
	deadline := sendTime + cr.handshakeAllowance() + cr.grace()
	args := cr.pubArgs(NodePub, fmt.Sprintf("lab-pub-%d", rep), topic, filepath.Join(repDir, "pub.csv"), cr.c.Messages, cr.c.Interval())
	if cr.c.Reconnect {
		// Each reconnection may take up to the publisher's --timeout.
		deadline += 3 * cr.handshakeAllowance()
		args.Reconnect, args.Persistent, args.SessionCache = true, true, filepath.Join(repDir, "session-cache")
	}
	sub, err := cr.startSub(ctx, rep, repDir, topic, cr.c.Messages, deadline+10*time.Second, spawnOpts{})
	if err != nil {
		return err
	}
	bg, err := cr.background(ctx, rep, repDir, base, deadline)
	if err != nil {
		sub.stop(3 * time.Second)
		return err
	}
	pub, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodePub, records.RolePub, repDir, "pub", args.Argv(), spawnOpts{})
	if err != nil {
		sub.stop(3 * time.Second)
		cr.stopAll(rep, bg)
		return err
	}
	var runErr error
	if !pub.wait(ctx, deadline) {
		runErr = fmt.Errorf("publisher did not finish within %s", deadline)
	}
	return cr.finishOnePub(ctx, rep, repDir, topic, pub, sub, bg, runErr)
}
