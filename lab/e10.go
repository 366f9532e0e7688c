package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/iotq/iotq/link"
	"github.com/iotq/iotq/records"
)

// E10 (docs/experiments.md): a paced QoS 1 stream whose publisher's path
// changes ChangeAt after the publisher started: its NAT rebinds (every
// flow gets a new external port, so the broker sees a new source address
// and the NAT drops what still comes to the old one), or its link moves
// from the wifi profile's delay and rate to the cellular profile's and the
// NAT rebinds at the same instant (a new network, a new address). The move
// is make-before-break, without an outage: an outage would add the same
// dead time to every transport and hide what the transports themselves
// cost. TCP connections die with the rebinding (the broker answers the
// unknown 4-tuple with a reset); `iotq pub --reconnect` dials again and
// resends. QUIC connections should survive it (the broker follows the new
// address after path validation, RFC 9000 section 9): its publisher's
// reconnects say whether they did.

// pathChanger is a Network that can change the publisher's path while it
// runs: the link fabric (the local fabric has no links to change).
type pathChanger interface {
	// changePath makes the cell's path change now.
	changePath(c Cell) error
	// restorePath puts the publisher's link back to the cell's own
	// parameters (after a wifi-to-cellular change), for the next
	// repetition; the NAT keeps its latest mappings.
	restorePath(c Cell) error
}

// stepTo is the schedule step that gives a direction the delay, rate and
// loss of l.
func stepTo(l LinkParams) (link.Step, error) {
	p, err := toParams(l)
	if err != nil {
		return link.Step{}, err
	}
	return link.Step{Delay: &p.Delay, Rate: &p.Rate, Loss: &p.Loss}, nil
}

func (l *linkNet) changePath(c Cell) error {
	var ab, ba link.Step
	if c.ChangeLink != nil {
		var err error
		if ab, err = stepTo(*c.ChangeLink); err != nil {
			return err
		}
		ba = ab
	}
	ab.Rebind = true // the publisher sits behind the NAT (A of link pub)
	if err := l.n.Change("pub", NodePub, ab); err != nil {
		return err
	}
	if c.ChangeLink == nil {
		return nil
	}
	return l.n.Change("pub", NodeBroker, ba)
}

func (l *linkNet) restorePath(c Cell) error {
	if c.ChangeLink == nil {
		return nil
	}
	st, err := stepTo(c.PubLink)
	if err != nil {
		return err
	}
	return errors.Join(l.n.Change("pub", NodePub, st), l.n.Change("pub", NodeBroker, st))
}

// e10Estimate is the expected duration of one E10 repetition besides the
// stream's fixed costs: the stream, the subscriber's start, a reconnection
// (TCP: a few round trips on the new path) and the subscriber's grace,
// which it waits for in full (it counts duplicates, so it does not stop
// at a message count).
func e10Estimate(c Cell) time.Duration {
	rtt := c.PathRTT()
	if c.ChangeLink != nil {
		rtt = max(rtt, c.ChangeLink.RTT()+c.SubLink.RTT())
	}
	return 500*time.Millisecond + time.Duration(c.Messages)*c.Interval() + time.Second + 6*rtt + time.Duration(c.GraceNs) + 4*rtt
}

// repPathChange runs one repetition of E10.
func (cr *cellRun) repPathChange(ctx context.Context, rep int, repDir, base string) error {
	pc, ok := cr.net.(pathChanger)
	if !ok {
		return fmt.Errorf("E10: the %s fabric has no link to change: pattern %s runs on the link fabric (root)", cr.r.opts.Fabric.Name(), PatternPathChange)
	}
	topic := base + "/m"
	stream := time.Duration(cr.c.Messages) * cr.c.Interval()
	deadline := stream + 2*cr.handshakeAllowance() + cr.grace()
	// -n 0: the subscriber counts duplicates too, so it must not stop at
	// a message count; the lab stops it after the publisher and the grace.
	sub, err := cr.startSub(ctx, rep, repDir, topic, 0, deadline+10*time.Second, spawnOpts{})
	if err != nil {
		return err
	}
	before, err := cr.net.Counters()
	if err != nil {
		sub.stop(3 * time.Second)
		return fmt.Errorf("link counters: %w", err)
	}
	args := cr.pubArgs(NodePub, fmt.Sprintf("lab-pub-%d", rep), topic, filepath.Join(repDir, "pub.csv"), cr.c.Messages, cr.c.Interval())
	args.Reconnect, args.Persistent, args.SessionCache = true, true, filepath.Join(repDir, "session-cache")
	pub, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodePub, records.RolePub, repDir, "pub", args.Argv(), spawnOpts{})
	if err != nil {
		sub.stop(3 * time.Second)
		return err
	}
	started := time.Now()
	row := records.E10Row{Cell: cr.c.ID, Experiment: cr.c.Experiment, Rep: rep, Transport: cr.c.Transport, PathChange: cr.c.PathChange,
		Profile: cr.c.Profile, LossPct: cr.c.PubLink.LossPct, LinkRTTNs: int64(cr.c.PubLink.RTT()), ChangeAtNs: cr.c.ChangeAtNs}
	row.ChangeLinkRTTNs = row.LinkRTTNs
	if cr.c.ChangeLink != nil {
		row.ChangeLinkRTTNs = int64(cr.c.ChangeLink.RTT())
	}
	var runErr error
	t := time.NewTimer(time.Duration(cr.c.ChangeAtNs))
	select {
	case <-t.C:
		row.ChangeNs = time.Now().UnixNano()
		if err := pc.changePath(cr.c); err != nil {
			runErr = fmt.Errorf("E10: change the path: %w", err)
		}
	case <-pub.done:
		runErr = fmt.Errorf("E10: the publisher exited %s after its start, before the path change at %s", time.Since(started).Round(time.Millisecond), time.Duration(cr.c.ChangeAtNs))
	case <-ctx.Done():
		runErr = ctx.Err()
	}
	t.Stop()
	if runErr == nil && !pub.wait(ctx, deadline-time.Since(started)) {
		runErr = fmt.Errorf("publisher did not finish within %s", deadline)
	}
	if err := pc.restorePath(cr.c); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("E10: restore the link: %w", err))
	}
	err = cr.finishOnePub(ctx, rep, repDir, topic, pub, sub, nil, runErr)
	after, cerr := cr.net.Counters()
	if cerr == nil {
		row.DropNAT = natDrops(after, "pub") - natDrops(before, "pub")
	}
	if row.ChangeNs > 0 {
		if werr := cr.e10Row(repDir, &row); werr != nil {
			err = errors.Join(err, werr)
		}
	}
	return err
}

// natDrops sums the nat drops of both directions of link name.
func natDrops(cs []LinkCounter, name string) int64 {
	var n int64
	for _, c := range cs {
		if c.Link == name {
			n += c.DropNAT
		}
	}
	return n
}

// e10Row fills row from the repetition's records and writes rep-N/e10.csv.
func (cr *cellRun) e10Row(repDir string, row *records.E10Row) error {
	pubs, err := readNodeRecords[records.PubRecord](filepath.Join(repDir, "pub.csv"))
	if err != nil {
		return err
	}
	subs, err := readNodeRecords[records.SubRecord](filepath.Join(repDir, "sub.csv"))
	if err != nil {
		return err
	}
	m := e10Metrics(pubs, subs, row.ChangeNs)
	row.Sent, row.Acknowledged, row.Delivered, row.Lost, row.Duplicated = m.sent, m.acked, m.delivered, m.lost, m.duplicated
	row.GapNs, row.GapBeforeNs, row.FirstAfterNs = m.gap, m.gapBefore, m.firstAfter
	if ps, ok := records.ReadPubStats(filepath.Join(repDir, "pub.stdout")); ok {
		row.Reconnects, row.Resent = ps.Reconnects, ps.Resent
		for _, ev := range ps.ReconnectEvents {
			if ev.ConnectedNs > 0 {
				row.ReconnectNs = ev.ConnectedNs - ev.LostNs
				row.ReconnectResumed = ev.TLSResumed
				break
			}
		}
	}
	w, err := records.Create[records.E10Row](filepath.Join(repDir, records.FileE10))
	if err != nil {
		return err
	}
	if err := w.Write(*row); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// e10Measures are E10's metrics of one repetition (records.E10Row).
type e10Measures struct {
	sent, acked, delivered, lost, duplicated int
	gap, gapBefore, firstAfter               int64
}

// e10Metrics computes E10's metrics from one publisher's records (one row
// per message, its final outcome), the subscriber's records (one row per
// receipt, duplicates included) and the time of the change: what was
// lost (sent, never received) and duplicated (receipts beyond a message's
// first), the longest time between two consecutive receipts whose later
// one came after the change (and the longest before it), and the time
// from the change to the first receipt of a message sent after it.
func e10Metrics(pubs []records.PubRecord, subs []records.SubRecord, changeNs int64) e10Measures {
	var m e10Measures
	first := map[int64]int64{} // seq -> first receipt
	var recv []int64
	for _, s := range subs {
		recv = append(recv, s.RecvNs)
		if t, ok := first[s.Seq]; !ok || s.RecvNs < t {
			first[s.Seq] = s.RecvNs
		}
	}
	m.delivered = len(first)
	m.duplicated = len(subs) - len(first)
	for _, p := range pubs {
		if p.SendNs == 0 {
			continue // never handed over
		}
		m.sent++
		if p.OK {
			m.acked++
		}
		at, ok := first[p.Seq]
		if !ok {
			m.lost++
			continue
		}
		if p.SendNs > changeNs && (m.firstAfter == 0 || at-changeNs < m.firstAfter) {
			m.firstAfter = at - changeNs
		}
	}
	slices.Sort(recv)
	for i := 1; i < len(recv); i++ {
		d := recv[i] - recv[i-1]
		if recv[i] > changeNs {
			m.gap = max(m.gap, d)
		} else {
			m.gapBefore = max(m.gapBefore, d)
		}
	}
	return m
}

// shiftE10 copies a repetition's e10.csv into a pooled campaign
// (lab pool), its rep renumbered by offset.
func shiftE10(dst, src string, offset int) error {
	rows, _, err := records.ReadFile[records.E10Row](src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return writeRecords(dst, func(out *records.Writer[records.E10Row]) error {
		for _, r := range rows {
			r.Rep += offset
			if err := out.Write(r); err != nil {
				return err
			}
		}
		return nil
	})
}
