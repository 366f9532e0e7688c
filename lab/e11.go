package lab

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/records"
)

// E11 (docs/experiments.md): a QoS 1 stream from a publisher behind an
// emulated link to a three-node NATS cluster (JetStream, MQTT listener on
// every node); the node the publisher is on is killed (SIGKILL) half-way
// through the stream. MQTT over QUIC goes through two iotq gateway
// instances (client_hash over nodes 0 and 1; one certificate and one
// ticket-key file, a reconnecting publisher reaching the other one); MQTT over TCP+TLS goes straight to a
// node's MQTT listener (the gateway has no TCP side), the publisher
// trying node 0, then node 1, as a device with a server list does. The
// subscriber is on node 2, behind the clean link, and is never killed.
//
// Each repetition starts a fresh cluster (new JetStream store) so the
// repetitions are independent; everything runs in the broker's namespace
// (on the local fabric: on loopback), each process by PID.

// PatternFailover is E11's pattern: a paced QoS 1 stream during which the
// publisher's cluster node is killed; a publisher process that loses its
// connection is followed at once by a new one (same client id, session
// cache kept) until the stream's time is over.
const PatternFailover = "failover"

// Roles of E11's processes (cpu.csv, file names in rep-N/).
const (
	roleNATS      = "broker-nats"    // one nats-server node
	roleE11Gate   = "broker-gateway" // iotq gateway in front of nodes 0 and 1
	e11Nodes      = 3                // cluster size
	e11SubNode    = 2                // the subscriber's node, never killed
	e11MaxPubRuns = 64               // publisher processes per repetition at most
	e11Backoff    = 200 * time.Millisecond
	e11AckWait    = 5 * time.Second // NATS MQTT redelivery of an unacknowledged QoS 1 message
	// e11RecoverLimit bounds how long after the kill the publisher keeps
	// trying once the stream's time is over; e11TailMessages is what a
	// publisher process sends then.
	e11RecoverLimit = 60 * time.Second
	e11TailMessages = 10
)

// e11Cluster is a repetition's running cluster and gateways.
type e11Cluster struct {
	bin, version string
	nodes        []*e11Node
	gateways     []*child
	gwPorts      []int
	ca           string // CA of the gateway (quic) or of the nodes' TLS certificate (mqtts)
}

type e11Node struct {
	name                                   string
	port, clusterPort, mqttPort, monitPort int
	dir                                    string
	proc                                   *child
}

func (cl *e11Cluster) stop() {
	for _, g := range cl.gateways {
		g.stop(3 * time.Second)
	}
	for i := len(cl.nodes) - 1; i >= 0; i-- {
		if p := cl.nodes[i].proc; p != nil {
			p.stop(5 * time.Second)
		}
	}
}

// natsServer finds nats-server on PATH, in $GOBIN or in $(go env
// GOPATH)/bin, and its version line.
func natsServer() (string, string, error) {
	var cands []string
	if p, err := exec.LookPath("nats-server"); err == nil {
		cands = append(cands, p)
	}
	if d := os.Getenv("GOBIN"); d != "" {
		cands = append(cands, filepath.Join(d, "nats-server"))
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		for _, d := range filepath.SplitList(strings.TrimSpace(string(out))) {
			cands = append(cands, filepath.Join(d, "bin", "nats-server"))
		}
	}
	for _, p := range cands {
		if out, err := exec.Command(p, "--version").Output(); err == nil {
			return p, strings.TrimPrefix(strings.TrimSpace(string(out)), "nats-server: "), nil
		}
	}
	return "", "", fmt.Errorf("E11: nats-server not found on PATH, in $GOBIN or $(go env GOPATH)/bin: run scripts/setup.sh (it installs the pinned release)")
}

// startCluster starts three nats-server nodes in the broker's namespace,
// waits until each is healthy (JetStream included) and takes an MQTT
// session, then (quic) iotq gateway in front of nodes 0 and 1.
func (cr *cellRun) startCluster(ctx context.Context, repDir string) (*e11Cluster, error) {
	bin, version, err := natsServer()
	if err != nil {
		return nil, err
	}
	cl := &e11Cluster{bin: bin, version: version}
	tlsCell := cr.c.Transport == TransportTLS
	mqttHost := "0.0.0.0"
	if cr.local() {
		mqttHost = "127.0.0.1"
	}
	var tlsConf string
	if tlsCell {
		hosts := []string{"127.0.0.1"}
		for _, n := range BuildTopology(cr.c, "").Nodes {
			if a := cr.net.Addr(NodeBroker, n); a != "" && !slices.Contains(hosts, a) {
				hosts = append(hosts, a)
			}
		}
		files, err := certs.EnsureServerCert(filepath.Join(repDir, "nats-tls"), hosts)
		if err != nil {
			return nil, fmt.Errorf("E11: node certificate: %w", err)
		}
		cl.ca = files.CA
		tlsConf = fmt.Sprintf("  tls {\n    cert_file: %q\n    key_file: %q\n  }\n", files.Cert, files.Key)
	}
	ports := cr.e11Ports()
	for i := range e11Nodes {
		nd := &e11Node{name: "n" + strconv.Itoa(i), dir: filepath.Join(repDir, "nats-n"+strconv.Itoa(i))}
		for _, p := range []*int{&nd.port, &nd.clusterPort, &nd.mqttPort, &nd.monitPort} {
			if *p, err = ports(); err != nil {
				return nil, err
			}
		}
		cl.nodes = append(cl.nodes, nd)
	}
	for _, nd := range cl.nodes {
		var routes []string
		for _, o := range cl.nodes {
			if o != nd {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.clusterPort))
			}
		}
		// ack_wait 5s: an unacknowledged QoS 1 delivery is sent again
		// after 5 s, not NATS's default 30 s, so a repetition settles soon.
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n", nd.name, nd.port, nd.monitPort) +
			fmt.Sprintf("jetstream {\n  store_dir: %q\n  max_memory_store: 64MB\n  max_file_store: 1GB\n}\n", filepath.Join(nd.dir, "js")) +
			fmt.Sprintf("mqtt {\n  listen: %s:%d\n  stream_replicas: %d\n  ack_wait: %s\n%s}\n", mqttHost, nd.mqttPort, e11Nodes, e11AckWait, tlsConf) +
			fmt.Sprintf("cluster {\n  name: iotq-lab\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", nd.clusterPort, strings.Join(routes, ", "))
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			cl.stop()
			return nil, err
		}
		cf := filepath.Join(nd.dir, "nats.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
			cl.stop()
			return nil, err
		}
		nd.proc, err = spawn(ctx, cr.net, bin, NodeBroker, roleNATS, repDir, "nats-"+nd.name, []string{"-c", cf}, spawnOpts{})
		if err != nil {
			cl.stop()
			return nil, fmt.Errorf("E11: %w", err)
		}
	}
	if err := cr.waitCluster(ctx, cl); err != nil {
		cl.stop()
		return nil, err
	}
	if tlsCell {
		return cl, nil
	}
	if err := cr.startE11Gateway(ctx, repDir, cl); err != nil {
		cl.stop()
		return nil, err
	}
	return cl, nil
}

// waitCluster waits until every node answers /healthz with status ok
// (which includes JetStream's meta leader) and accepts an MQTT session.
func (cr *cellRun) waitCluster(ctx context.Context, cl *e11Cluster) error {
	deadline := time.Now().Add(cr.r.opts.ReadyTimeout + 60*time.Second)
	for {
		var notReady error
		for _, nd := range cl.nodes {
			if nd.proc.exited() {
				return fmt.Errorf("E11: %w: %w", ErrNodeExited, nd.proc.failure())
			}
			body, err := cr.nsHTTPGet(fmt.Sprintf("127.0.0.1:%d", nd.monitPort), "/healthz")
			if err == nil && !strings.Contains(body, `"ok"`) {
				err = fmt.Errorf("healthz: %s", strings.TrimSpace(body))
			}
			if err == nil {
				ca := ""
				if cr.c.Transport == TransportTLS {
					ca = cl.ca
				}
				err = cr.mqttAccepts(fmt.Sprintf("127.0.0.1:%d", nd.mqttPort), "lab-e11-probe-"+nd.name, ca)
			}
			if err != nil {
				notReady = fmt.Errorf("node %s: %w", nd.name, err)
				break
			}
		}
		if notReady == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("E11: %w: cluster not ready: %w", ErrNotReady, notReady)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// nsDial connects to addr from inside the broker's namespace.
// mqttAccepts reports whether the MQTT listener at addr (in the broker's
// namespace; TLS when ca names the CA to trust) answers an MQTT 3.1.1
// CONNECT with a CONNACK that accepts it. A NATS node reports healthy and
// accepts TCP before its MQTT layer can take a session (the first one
// creates the account's replicated JetStream streams); a client that
// connects then is disconnected without a CONNACK.
func (cr *cellRun) mqttAccepts(addr, clientID, ca string) error {
	c, err := cr.nsDial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("MQTT probe: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("MQTT probe: no certificate in %s", ca)
		}
		host, _, _ := net.SplitHostPort(addr)
		c = tls.Client(c, &tls.Config{RootCAs: pool, ServerName: host, MinVersion: tls.VersionTLS12})
	}
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	// CONNECT: protocol "MQTT" level 4, clean session, keep-alive 10 s.
	vh := []byte{0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 10, byte(len(clientID) >> 8), byte(len(clientID))}
	body := append(vh, clientID...)
	if len(body) > 127 {
		return fmt.Errorf("MQTT probe: client id %q too long", clientID)
	}
	if _, err := c.Write(append([]byte{0x10, byte(len(body))}, body...)); err != nil {
		return fmt.Errorf("MQTT probe: CONNECT: %w", err)
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(c, ack); err != nil {
		return fmt.Errorf("MQTT probe: no CONNACK: %w", err)
	}
	if ack[0] != 0x20 || ack[1] != 2 || ack[3] != 0 {
		return fmt.Errorf("MQTT probe: CONNACK % x does not accept the session", ack)
	}
	_, _ = c.Write([]byte{0xE0, 0}) // DISCONNECT
	return nil
}

func (cr *cellRun) nsDial(addr string) (net.Conn, error) {
	var c net.Conn
	dial := func() (err error) {
		c, err = net.DialTimeout("tcp", addr, 2*time.Second)
		return err
	}
	if ln, ok := cr.net.(*linkNet); ok {
		return c, ln.n.Do(NodeBroker, dial)
	}
	return c, dial()
}

// nsHTTPGet fetches http://addr/path of a node's monitoring port (inside
// the broker's namespace, so a plain request on a socket made there).
func (cr *cellRun) nsHTTPGet(addr, path string) (string, error) {
	c, err := cr.nsDial(addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr); err != nil {
		return "", err
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", err
	}
	s := string(b)
	if i := strings.Index(s, "\r\n\r\n"); i >= 0 {
		s = s[i+4:]
	}
	return s, nil
}

// e11Gateways is how many iotq gateway instances stand in front of the
// cluster in quic cells: two, as behind a UDP load balancer, sharing a
// certificate and session ticket keys.
const e11Gateways = 2

// startE11Gateway starts the gateway instances in the broker's namespace:
// QUIC (ALPN mqtt, 0-RTT accepted) with client_hash over nodes 0 and 1,
// each with a state directory of its own but one certificate and one
// ticket-key file (--tls-ticket-keys, as docs/deploy.md runs them), so a
// ticket from one instance resumes (0-RTT) on the other.
func (cr *cellRun) startE11Gateway(ctx context.Context, repDir string, cl *e11Cluster) error {
	host := "0.0.0.0"
	if cr.local() {
		host = "127.0.0.1"
	}
	hosts := []string{"127.0.0.1"}
	for _, n := range BuildTopology(cr.c, "").Nodes {
		if a := cr.net.Addr(NodeBroker, n); a != "" && !slices.Contains(hosts, a) {
			hosts = append(hosts, a)
		}
	}
	files, err := certs.EnsureServerCert(filepath.Join(repDir, "gateway-tls"), hosts)
	if err != nil {
		return fmt.Errorf("E11 gateway certificate: %w", err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fmt.Errorf("E11 gateway ticket key: %w", err)
	}
	keys := filepath.Join(repDir, "gateway-tls", "ticket.keys")
	if err := os.WriteFile(keys, []byte(hex.EncodeToString(key)+"\n"), 0o600); err != nil {
		return fmt.Errorf("E11 gateway ticket key: %w", err)
	}
	var ups []string
	for _, nd := range cl.nodes[:e11SubNode] {
		ups = append(ups, fmt.Sprintf("tcp://127.0.0.1:%d", nd.mqttPort))
	}
	cl.ca = files.CA
	ports := cr.e11Ports()
	for range cl.nodes {
		for range 4 { // past the nodes' ports
			if _, err := ports(); err != nil {
				return err
			}
		}
	}
	for i := range e11Gateways {
		port, err := ports()
		if err != nil {
			return err
		}
		base := fmt.Sprintf("gateway-%d", i+1)
		route := fmt.Sprintf("quic://%s:%d?alpn=mqtt&balance=client_hash&early_data=accept=%s", host, port, strings.Join(ups, ","))
		ready := filepath.Join(repDir, base+".ready.json")
		args := GatewayArgs{StateDir: filepath.Join(repDir, base+"-state"), Routes: []string{route},
			TLSCert: files.Cert, TLSKey: files.Key, TLSTicketKeys: keys,
			ReadyFile: ready, LogFormat: "json", LogLevel: "info"}
		g, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodeBroker, roleE11Gate, repDir, base, args.Argv(), spawnOpts{})
		if err != nil {
			return err
		}
		cl.gateways = append(cl.gateways, g)
		if _, err := waitReadyFile(ctx, ready, g, cr.r.opts.ReadyTimeout, func(b []byte) bool {
			_, err := records.ParseBrokerReady(b)
			return err == nil
		}); err != nil {
			return fmt.Errorf("E11 %s: %w", base, err)
		}
		cl.gwPorts = append(cl.gwPorts, port)
	}
	return nil
}

// nodeOf returns the index of the node (0 or 1) that serves the MQTT
// client id, from the nodes' /connz, or -1.
func (cr *cellRun) nodeOf(cl *e11Cluster, clientID string) int {
	for i, nd := range cl.nodes[:e11SubNode] {
		if nd.proc.exited() {
			continue
		}
		body, err := cr.nsHTTPGet(fmt.Sprintf("127.0.0.1:%d", nd.monitPort), "/connz?mqtt_client="+clientID)
		if err == nil && (strings.Contains(body, `"mqtt_client": "`+clientID+`"`) || strings.Contains(body, `"mqtt_client":"`+clientID+`"`)) {
			return i
		}
	}
	return -1
}

// repFailover runs one repetition of E11.
func (cr *cellRun) repFailover(ctx context.Context, rep int, repDir, base string) error {
	if cr.c.Transport != TransportQUIC && cr.c.Transport != TransportTLS {
		return fmt.Errorf("E11: transport %s: pattern %s runs %s (through the gateways) or %s (straight to a node)", cr.c.Transport, PatternFailover, TransportQUIC, TransportTLS)
	}
	cl, err := cr.startCluster(ctx, repDir)
	if err != nil {
		return err
	}
	defer func() {
		cl.stop()
		for _, nd := range cl.nodes {
			cr.cpuRow(rep, nd.proc)
		}
		for _, g := range cl.gateways {
			cr.cpuRow(rep, g)
		}
	}()
	topic := base + "/m"
	subNode := cl.nodes[e11SubNode]
	// the subscriber speaks what the node's listener does (mqtts cells: TLS)
	subScheme := "mqtt"
	if cr.c.Transport == TransportTLS {
		subScheme = TransportTLS
	}
	subURL := fmt.Sprintf("%s://%s", subScheme, net.JoinHostPort(cr.net.Addr(NodeBroker, NodeSub), strconv.Itoa(subNode.mqttPort)))
	subReady := filepath.Join(repDir, "sub.ready.json")
	// -n 0 and --timeout 0: the lab stops the subscriber after the stream
	subArgs := SubArgs{URL: subURL, Topic: topic + "/#", QoS: 1, Count: 0, Timeout: 0,
		ConnectTimeout: cr.handshakeAllowance(), Records: filepath.Join(repDir, "sub.csv"),
		Stats: "json", Quiet: true, ReadyFile: subReady, ClientID: fmt.Sprintf("lab-e11-sub-%d", rep)}
	if cr.c.Transport == TransportTLS {
		subArgs.CA = cl.ca
	}
	sub, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodeSub, records.RoleSub, repDir, "sub", subArgs.Argv(), spawnOpts{})
	if err != nil {
		return err
	}
	if _, err := waitReadyFile(ctx, subReady, sub, cr.handshakeAllowance(), func(b []byte) bool { return len(b) > 0 }); err != nil {
		sub.stop(3 * time.Second)
		return fmt.Errorf("E11 subscriber: %w", err)
	}

	clientID := fmt.Sprintf("lab-e11-pub-%d", rep)
	cache := filepath.Join(repDir, "session-cache")
	interval := cr.c.Interval()
	stream := time.Duration(cr.c.Messages) * interval
	start := time.Now()
	streamEnd, killAt := start.Add(stream), start.Add(stream/2)
	row := records.E11Row{Cell: cr.c.ID, Experiment: cr.c.Experiment, LinkRTTNs: int64(cr.c.PubLink.RTT()), Rep: rep, Transport: cr.c.Transport, Profile: cr.c.Profile, LossPct: cr.c.PubLink.LossPct, NATSVersion: cl.version}
	var runs []pubRun
	var runErr error
	tlsNode := 0 // mqtts: the node the publisher dials
	killed := false
	kill := func(pubNode int) {
		idx, target := cr.nodeOf(cl, clientID), "publisher"
		if idx < 0 {
			idx, target = pubNode, "assumed"
		}
		nd := cl.nodes[idx]
		row.KillNs, row.KilledNode, row.KillTarget = time.Now().UnixNano(), nd.name, target
		_ = nd.proc.cmd.Process.Kill() // SIGKILL: the machine dies, no graceful leave
		<-nd.proc.done
		killed = true
	}
	// The stream runs its time; past it, the publisher keeps dialling
	// (a few messages per process) until it has published again after the
	// kill, or e11RecoverLimit after the kill: a recovery slower than the
	// stream's second half is measured, not cut off.
	recovered := false
	for k := 1; len(runs) < e11MaxPubRuns && ctx.Err() == nil; k++ {
		if !time.Now().Before(streamEnd) && (recovered || !killed || time.Since(killAt) > e11RecoverLimit) {
			break
		}
		n := max(int((time.Until(streamEnd)+interval-1)/interval), e11TailMessages)
		brokerAddr := cr.net.Addr(NodeBroker, NodePub)
		url := fmt.Sprintf("mqtts://%s", net.JoinHostPort(brokerAddr, strconv.Itoa(cl.nodes[tlsNode].mqttPort)))
		if cr.c.Transport == TransportQUIC {
			// each new connection reaches the other gateway instance, as
			// when a load balancer sends a reconnecting client elsewhere
			gw := cl.gwPorts[(k-1)%len(cl.gwPorts)] // k counts from 1
			url = fmt.Sprintf("quic://%s", net.JoinHostPort(brokerAddr, strconv.Itoa(gw)))
		}
		pr := pubRun{file: fmt.Sprintf("pub-%d.csv", k), stats: fmt.Sprintf("pub-%d.stdout", k), role: records.RolePub,
			topic: fmt.Sprintf("%s/%d", topic, k), base: fmt.Sprintf("pub-%d", k)}
		args := PubArgs{URL: url, CA: cl.ca, Topic: pr.topic, QoS: 1, Size: cr.c.Size, Count: n, Interval: interval,
			Records: filepath.Join(repDir, pr.file), Stats: "json", ClientID: clientID, Timeout: cr.handshakeAllowance(), SessionCache: cache}
		p, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodePub, records.RolePub, repDir, pr.base, args.Argv(), spawnOpts{})
		if err != nil {
			runErr = err
			break
		}
		runs = append(runs, pr)
		started := time.Now()
		tick := time.NewTicker(20 * time.Millisecond)
		for !p.exited() && ctx.Err() == nil {
			if !killed && time.Now().After(killAt) {
				kill(tlsNode)
			}
			if time.Now().After(streamEnd.Add(e11RecoverLimit + cr.handshakeAllowance() + cr.grace() + e11AckWait)) {
				break // the last process waits for its acknowledgements; bounded
			}
			select {
			case <-p.done:
			case <-tick.C:
			case <-ctx.Done():
			}
		}
		tick.Stop()
		p.stop(3 * time.Second)
		cr.cpuRow(rep, p)
		if killed && !recovered {
			recovered = ackedAfter(filepath.Join(repDir, pr.file), row.KillNs)
		}
		if p.waitErr == nil {
			continue
		}
		// the connection failed or was lost: the next process dials again
		// (mqtts: the next node still alive, as a client's server list)
		if cr.c.Transport == TransportTLS && cl.nodes[tlsNode].proc.exited() {
			tlsNode = (tlsNode + 1) % e11SubNode
		}
		if time.Since(started) < e11Backoff {
			time.Sleep(e11Backoff)
		}
	}
	if !killed && runErr == nil && ctx.Err() == nil {
		runErr = errors.New("E11: the stream ended before the kill")
	}
	// redeliveries of unacknowledged messages come after ack_wait
	sub.wait(ctx, e11AckWait+cr.grace())
	sub.stop(5 * time.Second)
	cr.cpuRow(rep, sub)
	if err := cr.e11Row(repDir, runs, &row); err != nil {
		return errors.Join(runErr, err)
	}
	if err := cr.collect(rep, repDir, runs, sub); err != nil {
		return errors.Join(runErr, err)
	}
	return runErr
}

// ackedAfter reports whether the publisher records in path hold an
// acknowledged message sent after killNs.
func ackedAfter(path string, killNs int64) bool {
	pubs, _ := readNodeRecords[records.PubRecord](path)
	for _, p := range pubs {
		if p.OK && p.AcceptedNs > 0 && p.SendNs > killNs {
			return true
		}
	}
	return false
}

// e11Row fills row from the repetition's records and writes rep-N/e11.csv.
func (cr *cellRun) e11Row(repDir string, runs []pubRun, row *records.E11Row) error {
	subs, err := readNodeRecords[records.SubRecord](filepath.Join(repDir, "sub.csv"))
	if err != nil {
		return err
	}
	first := firstReceipts(subs)
	row.Delivered = len(first)
	row.Duplicated = len(subs) - len(first)
	acked := map[receiptKey]bool{}
	sentAt := map[receiptKey]int64{}
	for i, pr := range runs {
		pubs, err := readNodeRecords[records.PubRecord](filepath.Join(repDir, pr.file))
		if err != nil {
			return err
		}
		for _, p := range pubs {
			k := receiptKey{pr.topic, p.Seq}
			if p.SendNs > 0 {
				row.Sent++
				sentAt[k] = p.SendNs
			}
			if p.OK && p.AcceptedNs > 0 {
				acked[k] = true
				row.Acknowledged++
				if _, ok := first[k]; !ok {
					row.Lost++
				}
				if row.KillNs > 0 && p.SendNs > row.KillNs && (row.RecoverNs == 0 || p.AcceptedNs-row.KillNs < row.RecoverNs) {
					row.RecoverNs = p.AcceptedNs - row.KillNs
				}
			}
		}
		row.Connections++
		if cs, ok := records.ReadConnectionStats(filepath.Join(repDir, pr.stats)); ok && i > 0 {
			if cs.Used0RTT {
				row.Reconnects0RTT++
			}
			if cs.TLSResumed {
				row.ReconnectsResumed++
			}
		}
	}
	var lastBefore, firstAfter int64
	for k, s := range first {
		if !acked[k] {
			row.UnackedDelivered++
		}
		if row.KillNs == 0 {
			continue
		}
		if s.RecvNs <= row.KillNs && s.RecvNs > lastBefore {
			lastBefore = s.RecvNs
		}
		if sentAt[k] > row.KillNs && (firstAfter == 0 || s.RecvNs < firstAfter) {
			firstAfter = s.RecvNs
		}
	}
	if lastBefore > 0 && firstAfter > lastBefore {
		row.GapNs = firstAfter - lastBefore
	}
	w, err := records.Create[records.E11Row](filepath.Join(repDir, records.FileE11))
	if err != nil {
		return err
	}
	if err := w.Write(*row); err != nil {
		w.Close()
		return err
	}
	return w.Close()
}

// e11Estimate is the expected duration of one E11 repetition besides the
// stream: the cluster's start (three nodes electing a JetStream leader),
// the last acknowledgements and the wait for redeliveries.
func e11Estimate(c Cell) time.Duration {
	return 8*time.Second + time.Duration(c.Messages)*c.Interval() + e11AckWait + time.Duration(c.GraceNs) + 4*c.PathRTT()
}

// e11PortBase is the first port of the cluster's nodes and gateways in
// the broker's namespace: below Linux's ephemeral range (32768-60999), so
// the nodes' own outgoing route connections, whose source ports the
// kernel picks there, never take a port a node is about to listen on
// (a free port found by listening and closing could be taken that way:
// "bind: address already in use" on a router port).
const e11PortBase = 21000

// e11Ports returns the source of the cluster's listening ports: fixed,
// distinct ports in the broker's own namespace (nothing else listens
// there), free ports of the host on the local fabric, never one twice.
func (cr *cellRun) e11Ports() func() (int, error) {
	next := e11PortBase
	seen := map[int]bool{}
	return func() (int, error) {
		if !cr.local() {
			next++
			return next - 1, nil
		}
		for range 100 {
			p, err := freePort()
			if err != nil {
				return 0, err
			}
			if !seen[p] {
				seen[p] = true
				return p, nil
			}
		}
		return 0, errors.New("E11: no distinct free port found in 100 tries")
	}
}
