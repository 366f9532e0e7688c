package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/iotq/iotq/records"
)

// Pattern B, reconnect and reconnect-early (E5, E6): a resumed start.

func (cr *cellRun) repReconnect(ctx context.Context, rep int, repDir, base string) error {
	cache := filepath.Join(repDir, "session-cache")
	deadline := cr.handshakeAllowance() + cr.grace()
	// The measured messages have a subtree of their own: the shared
	// medium's background publishers use base/bg/N, and a subscription to
	// base/# counted their messages as the two it waits for (every E6
	// pattern B cell with more than one publisher failed on that).
	sub, err := cr.startSub(ctx, rep, repDir, base+"/m/#", 2, 3*deadline, spawnOpts{})
	if err != nil {
		return err
	}
	bg, err := cr.background(ctx, rep, repDir, base, 2*deadline)
	if err != nil {
		sub.stop(3 * time.Second)
		return err
	}
	runs := []pubRun{
		{file: "pub.csv", stats: "pub.stdout", role: records.RolePub, topic: base + "/m/1", base: "pub"},
		{file: "pub-resume.csv", stats: "pub-resume.stdout", role: records.RolePubResume, topic: base + "/m/2", base: "pub-resume"},
	}
	var runErr error
	for _, pr := range runs {
		args := cr.pubArgs(NodePub, fmt.Sprintf("lab-pub-%d", rep), pr.topic, filepath.Join(repDir, pr.file), 1, 0)
		args.SessionCache = cache
		// the resumed start: its PUBLISH rides with CONNECT (QUIC: in the
		// 0-RTT flight), its receipt is the PUBACK
		args.Early = cr.c.Pattern == PatternReconnectEarly && pr.role == records.RolePubResume
		p, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodePub, pr.role, repDir, pr.base, args.Argv(), spawnOpts{})
		if err != nil {
			runErr = err
			break
		}
		if !p.wait(ctx, deadline) {
			runErr = fmt.Errorf("%s did not finish within %s", pr.role, deadline)
		}
		p.stop(3 * time.Second)
		cr.cpuRow(rep, p)
		if runErr == nil && p.waitErr != nil {
			runErr = p.failure()
		}
		if runErr != nil {
			break
		}
	}
	sub.wait(ctx, cr.grace())
	sub.stop(5 * time.Second)
	cr.stopAll(rep, bg)
	cr.cpuRow(rep, sub)
	if err := cr.collect(rep, repDir, runs, sub); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}
