package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// ProcOptions configure a ProcRunner. Zero values are defaults.
type ProcOptions struct {
	// IOTQ is the iotq binary run as broker, pub and sub. Empty means the
	// running executable.
	IOTQ string
	// Fabric builds each cell's network. Required.
	Fabric Fabric
	// ReadyTimeout bounds the wait for a broker's or subscriber's ready
	// file. 0 means 30s.
	ReadyTimeout time.Duration
	// StallTimeout fails a stop-and-wait repetition that gets no receipt
	// for this long (plus 20 path round trips). 0 means 30s.
	StallTimeout time.Duration
	// NoPcap skips the capture of the publisher's link end.
	NoPcap bool
	// Logger; nil discards.
	Logger *slog.Logger
}

// ProcRunner is the real CellRunner: each node is an iotq child process
// in its namespace. Safe for concurrent use (Run calls RunCell from up to
// Jobs goroutines): it keeps only its read-only options, and each cell
// gets namespaces, processes and files of its own.
type ProcRunner struct {
	opts ProcOptions
	log  *slog.Logger
}

// NewProcRunner checks the options and the iotq binary.
func NewProcRunner(opts ProcOptions) (*ProcRunner, error) {
	if opts.Fabric == nil {
		return nil, errors.New("lab: ProcOptions.Fabric is required")
	}
	if opts.IOTQ == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("lab: find the iotq binary (give --iotq PATH): %w", err)
		}
		opts.IOTQ = exe
	}
	abs, err := filepath.Abs(opts.IOTQ)
	if err != nil {
		return nil, fmt.Errorf("lab: iotq binary %s: %w", opts.IOTQ, err)
	}
	opts.IOTQ = abs
	if st, err := os.Stat(abs); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("lab: iotq binary %s is not an executable file: build it (go build -o bin/iotq ./cmd/iotq) and pass --iotq", abs)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 30 * time.Second
	}
	if opts.StallTimeout <= 0 {
		opts.StallTimeout = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ProcRunner{opts: opts, log: log}, nil
}

// cellRun is the state of one running cell.
type cellRun struct {
	r       *ProcRunner
	c       Cell
	dir     string
	net     Network
	w       *cellWriters
	port    int    // broker port of the cell's transport
	subPort int    // broker port of the subscriber's MQTT listener (CoAP cells), else 0
	ca      string // CA file of the broker
	lastCnt map[string]LinkCounter
	sum     CellSummary
	// sendLate holds how late every paced message of the cell left
	// (addSendLateness), summarised into sum.SendLate.
	sendLate []time.Duration
}

// RunCell builds the cell's network, starts the broker and runs every
// repetition. A repetition that fails is recorded (its records are kept)
// and the next one runs; the cell fails when no repetition succeeded or
// the broker failed.
func (r *ProcRunner) RunCell(ctx context.Context, c Cell, dir string) (sum CellSummary, err error) {
	pcap := ""
	if !r.opts.NoPcap {
		pcap = filepath.Join(dir, "pub.pcap")
	}
	topo := BuildTopology(c, pcap)
	n, err := r.opts.Fabric.Up(ctx, topo)
	if err != nil {
		return sum, fmt.Errorf("build network: %w", err)
	}
	defer func() {
		if cerr := n.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("tear down network: %w", cerr)
		}
	}()
	w, err := openCellWriters(dir)
	if err != nil {
		return sum, err
	}
	defer func() {
		if cerr := w.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	cr := &cellRun{r: r, c: c, dir: dir, net: n, w: w, lastCnt: map[string]LinkCounter{}}
	defer func() { sum.SendLate = summarizeLateness(cr.sendLate) }()
	if err := cr.writeNetInfo(); err != nil {
		return sum, err
	}
	broker, err := cr.startBroker(ctx)
	if err != nil {
		return sum, err
	}
	defer func() {
		broker.stop(5 * time.Second)
		for _, b := range broker {
			cr.cpuRow(0, b)
		}
	}()
	var errs []error
	for rep := 1; rep <= c.Repetitions; rep++ {
		if ctx.Err() != nil {
			return cr.sum, ctx.Err()
		}
		if rep > 1 {
			// Between two repetitions the admission control may hold the
			// cell (repgate.go).
			if err := waitRepGate(ctx); err != nil {
				return cr.sum, err
			}
		}
		if b := broker.failed(); b != nil {
			return cr.sum, fmt.Errorf("broker died before repetition %d: %w", rep, b.failure())
		}
		rerr := cr.runRep(ctx, rep)
		if cerr := cr.linkRows(rep); cerr != nil && rerr == nil {
			rerr = cerr
		}
		if rerr != nil {
			if ctx.Err() != nil {
				return cr.sum, ctx.Err()
			}
			r.log.Warn("repetition failed", "cell", c.ID, "rep", rep, "error", rerr)
			errs = append(errs, fmt.Errorf("rep %d: %w", rep, rerr))
			continue
		}
		cr.sum.RepsOK++
	}
	if cr.sum.RepsOK == 0 && len(errs) > 0 {
		return cr.sum, errors.Join(errs...)
	}
	if len(errs) > 0 {
		r.log.Warn("cell completed with failed repetitions", "cell", c.ID, "failed", len(errs))
		if err := os.WriteFile(filepath.Join(dir, "rep-errors.txt"), []byte(errors.Join(errs...).Error()+"\n"), 0o644); err != nil {
			return cr.sum, err
		}
	}
	return cr.sum, nil
}

// writeNetInfo records the node addresses and congestion control.
func (cr *cellRun) writeNetInfo() error {
	info := map[string]any{}
	nodes := map[string]map[string]string{}
	for _, node := range BuildTopology(cr.c, "").Nodes {
		nodes[node] = map[string]string{
			"tcp_congestion":   cr.net.CongestionControl(node),
			"broker_addr_from": cr.net.Addr(NodeBroker, node),
		}
	}
	info["nodes"] = nodes
	info["fabric"] = cr.r.opts.Fabric.Name()
	info["cell"] = cr.c
	b, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return fmt.Errorf("network info: %w", err)
	}
	return os.WriteFile(filepath.Join(cr.dir, "network.json"), append(b, '\n'), 0o644)
}

func (cr *cellRun) startMQTTBroker(ctx context.Context) (*child, error) {
	// CoAP cells: the publisher speaks CoAP on the lossy link, the
	// subscriber MQTT (plain TCP) on the clean one; both reach the same
	// topic space.
	schemes := []string{cr.c.Transport}
	if cr.c.ProtocolName() == records.ProtocolCoAP {
		schemes = append(schemes, TransportMQTT)
	}
	host := "0.0.0.0"
	if cr.r.opts.Fabric.Name() == "local" {
		// Every node shares the host: let the kernel pick free ports; the
		// ready file tells which.
		host = "127.0.0.1"
	}
	ready := filepath.Join(cr.dir, "broker.ready.json")
	args := BrokerArgs{QUIC0RTT: cr.c.QUIC0RTT, StateDir: filepath.Join(cr.dir, "broker-state"), ReadyFile: ready, LogFormat: "json"}
	ports := map[string]int{}
	for _, scheme := range schemes {
		port := transport.DefaultPort(transport.Scheme(scheme))
		if host == "127.0.0.1" {
			port = 0
		}
		ports[scheme] = port
		args.Listen = append(args.Listen, fmt.Sprintf("%s://%s:%d", scheme, host, port))
	}
	b, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodeBroker, records.RoleBroker, cr.dir, "broker", args.Argv(), spawnOpts{})
	if err != nil {
		return nil, err
	}
	data, err := waitReadyFile(ctx, ready, b, cr.r.opts.ReadyTimeout, func(b []byte) bool {
		_, err := records.ParseBrokerReady(b)
		return err == nil
	})
	if err != nil {
		b.stop(3 * time.Second)
		return nil, fmt.Errorf("broker: %w", err)
	}
	br, _ := records.ParseBrokerReady(data)
	cr.ca = br.CAFile
	for _, l := range br.Listeners {
		ep, err := transport.ParseURL(l)
		if err == nil && ep.Port != 0 {
			if _, ok := ports[string(ep.Scheme)]; ok {
				ports[string(ep.Scheme)] = ep.Port
			}
		}
	}
	cr.port = ports[cr.c.Transport]
	if len(schemes) > 1 {
		cr.subPort = ports[TransportMQTT]
	}
	for _, scheme := range schemes {
		if ports[scheme] == 0 {
			b.stop(3 * time.Second)
			return nil, fmt.Errorf("broker: ready file lists no %s listener with a port: %v", scheme, br.Listeners)
		}
	}
	if r, _ := endpoint.Lookup(cr.c.Transport); cr.ca == "" && r.TLS {
		b.stop(3 * time.Second)
		return nil, errors.New("broker: ready file names no ca_file")
	}
	return b, nil
}

// subURL is the broker URL of the subscriber (and the echo receiver) as
// seen from node: the cell's transport, or for CoAP cells MQTT over TCP
// (the subscriber's side is not what E7 compares).
func (cr *cellRun) subURL(from string) string {
	if cr.subPort == 0 {
		return cr.url(from)
	}
	return fmt.Sprintf("%s://%s", TransportMQTT, net.JoinHostPort(cr.net.Addr(NodeBroker, from), strconv.Itoa(cr.subPort)))
}

// url is the broker URL as seen from node.
func (cr *cellRun) url(from string) string {
	return fmt.Sprintf("%s://%s", cr.c.Transport, net.JoinHostPort(cr.net.Addr(NodeBroker, from), strconv.Itoa(cr.port)))
}

// timing helpers
func (cr *cellRun) rtt() time.Duration { return cr.c.PathRTT() }

func (cr *cellRun) grace() time.Duration {
	return time.Duration(cr.c.GraceNs) + 4*cr.rtt()
}

// handshakeAllowance covers connection setup on a lossy, slow link.
func (cr *cellRun) handshakeAllowance() time.Duration {
	return 30*time.Second + 20*cr.rtt()
}

// subArgs is the command line of a cell's subscriber; with notify it
// prints its receipts for the stop-and-wait relay.
func (cr *cellRun) subArgs(node, base string, rep int, topic, recFile, readyFile string, n int, notify bool, timeout time.Duration) SubArgs {
	a := SubArgs{URL: cr.subURL(node), CA: cr.ca, Topic: topic, QoS: cr.c.QoS, Count: n, Timeout: timeout,
		ConnectTimeout: cr.handshakeAllowance(), Records: recFile, Stats: "json", Quiet: true, ReadyFile: readyFile,
		ClientID: fmt.Sprintf("lab-%s-%d", base, rep), QUIC: quicClientArgs(cr.c)}
	if notify {
		a.Notify = "stdout"
	}
	return a
}

// pubArgs is the command line of a cell's publisher; the patterns add
// their own flags (reconnect, gate, ...) to it.
func (cr *cellRun) pubArgs(node, clientID, topic, recFile string, n int, interval time.Duration) PubArgs {
	return PubArgs{URL: cr.url(node), CA: cr.ca, Topic: topic, QoS: cr.c.QoS, Size: cr.c.Size, Count: n, Interval: interval,
		Records: recFile, Stats: "json", ClientID: clientID, Timeout: cr.handshakeAllowance(), QUIC: quicClientArgs(cr.c)}
}

// startSub starts the subscriber and waits for its ready file.
func (cr *cellRun) startSub(ctx context.Context, rep int, repDir, topic string, n int, timeout time.Duration, o spawnOpts, edit ...func(*SubArgs)) (*child, error) {
	return cr.startSubOn(ctx, NodeSub, records.RoleSub, "sub", rep, repDir, topic, n, timeout, o, edit...)
}

// startSubOn starts a subscriber on node, with files repDir/base.*, and
// waits for its ready file. edit adds a pattern's own flags.
func (cr *cellRun) startSubOn(ctx context.Context, node, role, base string, rep int, repDir, topic string, n int, timeout time.Duration, o spawnOpts, edit ...func(*SubArgs)) (*child, error) {
	ready := filepath.Join(repDir, base+".ready")
	args := cr.subArgs(node, base, rep, topic, filepath.Join(repDir, base+".csv"), ready, n, o.onLine != nil, timeout)
	for _, e := range edit {
		e(&args)
	}
	s, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, node, role, repDir, base, args.Argv(), o)
	if err != nil {
		return nil, err
	}
	if _, err := waitReadyFile(ctx, ready, s, cr.r.opts.ReadyTimeout+cr.handshakeAllowance(), func([]byte) bool { return true }); err != nil {
		s.stop(3 * time.Second)
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	return s, nil
}

// runRep runs one repetition of the cell's pattern and writes its records.
func (cr *cellRun) runRep(ctx context.Context, rep int) error {
	repDir := filepath.Join(cr.dir, fmt.Sprintf("rep-%d", rep))
	if err := os.MkdirAll(repDir, 0o755); err != nil {
		return err
	}
	base := fmt.Sprintf("lab/%d", rep)
	// The publishers' records are complete once the pattern returns,
	// whether it succeeded or not.
	defer cr.addSendLateness(repDir)
	p, ok := patternByName(cr.c.Pattern)
	if !ok {
		return fmt.Errorf("cell %s: pattern %q has no runner", cr.c.ID, cr.c.Pattern)
	}
	return p.rep(cr, ctx, rep, repDir, base)
}

// background starts the other publishers of a shared medium: periodic
// publishing at the cell's interval, on topics the subscriber ignores.
func (cr *cellRun) background(ctx context.Context, rep int, repDir, base string, d time.Duration) ([]*child, error) {
	var out []*child
	for i := 2; i <= cr.c.Publishers; i++ {
		node := pubName(i)
		n := int(d/cr.c.Interval()) + 10
		args := cr.pubArgs(node, fmt.Sprintf("lab-%s-%d", node, rep), fmt.Sprintf("%s/bg/%d", base, i),
			filepath.Join(repDir, node+".csv"), n, cr.c.Interval())
		p, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, node, records.RolePubBackground, repDir, node, args.Argv(), spawnOpts{})
		if err != nil {
			for _, c := range out {
				c.stop(3 * time.Second)
			}
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func (cr *cellRun) stopAll(rep int, cs []*child) {
	for _, c := range cs {
		c.stop(3 * time.Second)
		cr.cpuRow(rep, c)
	}
}

// finishOnePub ends a repetition with one publisher and one subscriber:
// stops them and the background nodes, records their CPU time and collects
// their files. runErr is the repetition's error so far.
func (cr *cellRun) finishOnePub(ctx context.Context, rep int, repDir, topic string, pub, sub *child, bg []*child, runErr error) error {
	pub.stop(3 * time.Second)
	if runErr == nil && pub.waitErr != nil {
		runErr = pub.failure()
	}
	sub.wait(ctx, cr.grace())
	sub.stop(5 * time.Second)
	cr.stopAll(rep, bg)
	cr.cpuRow(rep, pub)
	cr.cpuRow(rep, sub)
	if err := cr.collect(rep, repDir, []pubRun{{file: "pub.csv", stats: "pub.stdout", role: records.RolePub, topic: topic}}, sub); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// pubRun names the files of one measured publisher process.
type pubRun struct {
	file, stats, role, topic, base string
}

// collect turns a repetition's node records into the cell's records.
func (cr *cellRun) collect(rep int, repDir string, runs []pubRun, sub *child) error {
	subs, err := readNodeRecords[records.SubRecord](filepath.Join(repDir, "sub.csv"))
	if err != nil {
		return err
	}
	first := firstReceipts(subs)
	// batch-echo: the echoes back at the sender (same seq, topic .../echo)
	echoes, err := readNodeRecords[records.SubRecord](filepath.Join(repDir, "echo.csv"))
	if err != nil {
		return err
	}
	echoAt := map[int64]int64{}
	for _, e := range echoes {
		if t, ok := echoAt[e.Seq]; !ok || e.RecvNs < t {
			echoAt[e.Seq] = e.RecvNs
		}
	}
	c := cr.c
	var published, delivered int
	var seqOffset int64
	var startNs, endNs int64
	var firstSubRecv, dialStart int64
	ackedLost := 0 // acknowledged by the broker, never at the subscriber
	for _, s := range subs {
		if firstSubRecv == 0 || s.RecvNs < firstSubRecv {
			firstSubRecv = s.RecvNs
		}
	}
	var errs []error
	for _, pr := range runs {
		pubs, err := readNodeRecords[records.PubRecord](filepath.Join(repDir, pr.file))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var firstDelivery, maxSeq int64
		for _, p := range pubs {
			if !p.OK && (c.Pattern != PatternClosedLoop || p.SendNs == 0) {
				continue
			}
			// closed-loop: a message that failed (CoAP: out of
			// retransmissions) was sent and is lost unless it arrived
			published++
			topic := pr.topic
			if p.Topic != "" {
				topic = p.Topic // multi-topic (E9): each message names its own
			}
			m := records.Message{Cell: c.ID, Rep: rep, Protocol: c.ProtocolName(), Transport: c.Transport, QoS: c.QoS,
				Seq: p.Seq + seqOffset, Size: p.Size, SendNs: p.SendNs, Node: NodePub, Topic: topic, AcceptedNs: p.AcceptedNs,
				EchoNs: echoAt[p.Seq]}
			if s, ok := first[receiptKey{topic, p.Seq}]; ok {
				delivered++
				m.RecvNs, m.DelayNs = s.RecvNs, s.DelayNs
				if m.DelayNs == 0 {
					m.DelayNs = s.RecvNs - p.SendNs
				}
				if firstDelivery == 0 || s.RecvNs < firstDelivery {
					firstDelivery = s.RecvNs
				}
				endNs = max(endNs, s.RecvNs)
			} else if p.OK {
				ackedLost++
			}
			if startNs == 0 || p.SendNs < startNs {
				startNs = p.SendNs
			}
			maxSeq = max(maxSeq, p.Seq)
			if err := cr.w.messages.Write(m); err != nil {
				return err
			}
		}
		if len(pubs) > 0 {
			seqOffset += maxSeq + 1 // the next process's seq 0 follows this one's last
		}
		if cs, ok := records.ReadConnectionStats(filepath.Join(repDir, pr.stats)); ok {
			if dialStart == 0 {
				dialStart = cs.DialStartNs
			}
			ps, _ := records.ReadPubStats(filepath.Join(repDir, pr.stats))
			if err := cr.connRow(rep, pr.role, NodePub, cs, firstDelivery, ps.Reconnects); err != nil {
				return err
			}
		}
	}
	if cs, ok := records.ReadConnectionStats(filepath.Join(repDir, "sub.stdout")); ok {
		if err := cr.connRow(rep, records.RoleSub, NodeSub, cs, firstSubRecv, 0); err != nil {
			return err
		}
	}
	if c.Pattern == PatternBatch || c.Pattern == PatternBatchResume || c.Pattern == PatternBatchEcho {
		// communication time: from the connection's start, not the first send
		startNs = dialStart
	}
	if c.Pattern == PatternStopAndWait || c.Pattern == PatternBatch || c.Pattern == PatternBatchResume || c.Pattern == PatternBatchEcho {
		comp := records.Completion{Cell: c.ID, Rep: rep, Transport: c.Transport, StartNs: startNs, EndNs: endNs,
			Delivered: delivered, Published: published}
		if delivered == published && published == c.Messages && startNs > 0 && endNs > startNs {
			comp.CompletionNs = endNs - startNs
		}
		if err := cr.w.completions.Write(comp); err != nil {
			return err
		}
	}
	cr.sum.Published += published
	cr.sum.Delivered += delivered
	if c.QoS > 0 && ackedLost > 0 {
		errs = append(errs, fmt.Errorf("QoS %d: %d of %d acknowledged messages never reached the subscriber", c.QoS, ackedLost, published))
	}
	if published == 0 {
		errs = append(errs, errors.New("the publisher recorded no message"))
	}
	return errors.Join(errs...)
}

func (cr *cellRun) connRow(rep int, role, node string, cs records.ConnectionStats, firstDelivery int64, reconnects int) error {
	// the lab's transport name (mqtts, quic), as in messages.csv
	return cr.w.connections.Write(records.Connection{Cell: cr.c.ID, Rep: rep, Role: role, Node: node, Transport: cr.c.Transport,
		DialStartNs: cs.DialStartNs, TransportReadyNs: cs.TransportReadyNs, ConnackNs: cs.ConnackNs,
		FirstDeliveryNs: firstDelivery, Resumed: cs.TLSResumed, Used0RTT: cs.Used0RTT, EarlySentNs: cs.EarlySentNs,
		// what the client used, from its own stats (empty off MQTT over
		// QUIC), not what the cell asked for
		QUICStreamStrategy: cs.QUICStreamStrategy, QUICDatagrams: cs.QUICDatagrams, Reconnects: reconnects})
}

func (cr *cellRun) cpuRow(rep int, c *child) {
	if c == nil {
		return
	}
	u, s, ok := c.rusage()
	if !ok {
		return
	}
	_ = cr.w.cpu.Write(records.CPU{Cell: cr.c.ID, Rep: rep, Node: c.node, Role: c.role, UserNs: u, SysNs: s})
}

// linkRows writes the counters accumulated during rep (difference to the
// previous snapshot).
func (cr *cellRun) linkRows(rep int) error {
	cnt, err := cr.net.Counters()
	if err != nil {
		return fmt.Errorf("link counters: %w", err)
	}
	for _, lc := range cnt {
		k := lc.Link + "|" + lc.Direction
		prev := cr.lastCnt[k]
		cr.lastCnt[k] = lc
		if err := cr.w.links.Write(records.LinkCount{Cell: cr.c.ID, Rep: rep, Link: lc.Link, Direction: lc.Direction,
			Packets: lc.Packets - prev.Packets, Bytes: lc.Bytes - prev.Bytes, DropRandom: lc.DropRandom - prev.DropRandom,
			DropQueue: lc.DropQueue - prev.DropQueue, DropRetries: lc.DropRetries - prev.DropRetries,
			DropDown: lc.DropDown - prev.DropDown, DropNAT: lc.DropNAT - prev.DropNAT}); err != nil {
			return err
		}
	}
	return nil
}
