package lab

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/records"
)

// Pattern A, stop-and-wait (E4, E6): the next message only after the
// subscriber reported the previous one, relayed out of band.

func (cr *cellRun) repStopAndWait(ctx context.Context, rep int, repDir, base string) error {
	topic := base + "/m"
	recv := make(chan int64, cr.c.Messages+16)
	onLine := func(line string) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "recv" {
			if seq, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				select {
				case recv <- seq:
				default:
				}
			}
		}
	}
	stall := cr.r.opts.StallTimeout + 20*cr.rtt()
	total := time.Duration(cr.c.Messages)*(stall) + cr.handshakeAllowance()
	sub, err := cr.startSub(ctx, rep, repDir, topic, cr.c.Messages, total, spawnOpts{onLine: onLine})
	if err != nil {
		return err
	}
	bg, err := cr.background(ctx, rep, repDir, base, time.Duration(cr.c.Messages)*(cr.rtt()+50*time.Millisecond)+cr.handshakeAllowance())
	if err != nil {
		sub.stop(3 * time.Second)
		return err
	}
	args := cr.pubArgs(NodePub, fmt.Sprintf("lab-pub-%d", rep), topic, filepath.Join(repDir, "pub.csv"), cr.c.Messages, 0)
	args.Gate = "stdin"
	pub, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodePub, records.RolePub, repDir, "pub", args.Argv(), spawnOpts{stdin: true})
	if err != nil {
		sub.stop(3 * time.Second)
		cr.stopAll(rep, bg)
		return err
	}
	runErr := cr.relay(ctx, pub, sub, recv, stall)
	if runErr == nil {
		if !pub.wait(ctx, cr.grace()+10*time.Second) {
			runErr = errors.New("publisher did not exit after the last message")
		}
	}
	return cr.finishOnePub(ctx, rep, repDir, topic, pub, sub, bg, runErr)
}

// relay passes the subscriber's receipts to the publisher's gate, out of
// band (a pipe on this host, never the emulated links): message i+1 is
// released only after the subscriber reported message i.
func (cr *cellRun) relay(ctx context.Context, pub, sub *child, recv <-chan int64, stall time.Duration) error {
	got := map[int64]bool{}
	// --gate stdin publishes one message per line: release the first one.
	if _, err := fmt.Fprintln(pub.stdin, "go"); err != nil {
		return fmt.Errorf("release the first message: %w", err)
	}
	timer := time.NewTimer(stall + cr.handshakeAllowance())
	defer timer.Stop()
	for len(got) < cr.c.Messages {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case seq := <-recv:
			if got[seq] {
				continue
			}
			got[seq] = true
			if len(got) < cr.c.Messages {
				if _, err := fmt.Fprintf(pub.stdin, "%d\n", seq); err != nil {
					return fmt.Errorf("release the next message: %w", err)
				}
			} else {
				pub.stdin.Close() // end of input: the publisher finishes
			}
			if !timer.Stop() {
				select {
				case <-timer.C:
				default:
				}
			}
			timer.Reset(stall)
		case <-timer.C:
			return fmt.Errorf("%w: %d of %d messages received, none for %s", ErrStalled, len(got), cr.c.Messages, stall)
		case <-pub.done:
			if len(got) < cr.c.Messages {
				// Receipts may still be in flight; give them a moment.
				t := time.NewTimer(cr.grace())
				for len(got) < cr.c.Messages {
					select {
					case seq := <-recv:
						got[seq] = true
						continue
					case <-t.C:
					}
					break
				}
				t.Stop()
				if len(got) < cr.c.Messages {
					if pub.waitErr != nil {
						return pub.failure()
					}
					return fmt.Errorf("publisher exited after %d of %d receipts", len(got), cr.c.Messages)
				}
			}
		case <-sub.done:
			return sub.failure()
		}
	}
	return nil
}
