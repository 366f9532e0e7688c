package lab

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/iotq/iotq/internal/artemis"
	"github.com/iotq/iotq/internal/certs"
	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/transport"
	"github.com/iotq/iotq/transport/endpoint"
)

// Role of the processes that make up a cell's broker besides iotq broker
// (cpu.csv, the .cmd/.stdout/.stderr files in the cell directory).
const (
	roleArtemis = "broker-artemis" // ActiveMQ Artemis (AMQP 1.0)
	roleGateway = "broker-gateway" // iotq gateway (QUIC in front of Artemis)
)

// brokers are the processes of a cell's broker node, in start order; they
// are stopped in reverse order, each by its PID.
type brokers []*child

func (b brokers) stop(grace time.Duration) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i].stop(grace)
	}
}

// failed returns the first broker process that exited, or nil.
func (b brokers) failed() *child {
	for _, c := range b {
		if c.exited() {
			return c
		}
	}
	return nil
}

// startBroker starts what serves the cell's transport in the broker's
// namespace: iotq broker for MQTT and CoAP (with an MQTT listener for the
// subscriber of a CoAP cell); ActiveMQ Artemis for AMQP, with iotq
// gateway in front of it for amqp+quic (in the same namespace, so the
// emulated links carry QUIC and the gateway reaches Artemis over the
// namespace's loopback). It sets cr.port and cr.ca.
func (cr *cellRun) startBroker(ctx context.Context) (brokers, error) {
	if cr.c.Pattern == PatternFailover {
		return nil, nil // E11 starts a cluster per repetition (lab/e11.go)
	}
	switch cr.c.ProtocolName() {
	case records.ProtocolMQTT, records.ProtocolCoAP:
		b, err := cr.startMQTTBroker(ctx)
		if err != nil {
			return nil, err
		}
		return brokers{b}, nil
	case records.ProtocolAMQP:
		return cr.startAMQPBroker(ctx)
	}
	return nil, fmt.Errorf("broker: the lab has no broker for protocol %q (transport %s)", cr.c.ProtocolName(), cr.c.Transport)
}

func (cr *cellRun) local() bool { return cr.r.opts.Fabric.Name() == "local" }

func (cr *cellRun) startAMQPBroker(ctx context.Context) (brokers, error) {
	scheme := cr.c.Transport
	o := artemis.Options{Host: "0.0.0.0", Port: transport.DefaultPort(transport.Scheme(endpoint.SchemeAMQP)), StopOnEOF: true}
	if scheme == TransportAMQPQUIC {
		o.Host = "127.0.0.1" // only the gateway next to it connects
	}
	if cr.local() {
		o.Host = "127.0.0.1"
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		o.Port = p
	}
	cr.port = o.Port
	if scheme == TransportAMQPS {
		// A certificate for the broker's addresses as the nodes see them,
		// in a PKCS12 keystore for Artemis (generated per cell, no secret).
		hosts := []string{"127.0.0.1"}
		for _, n := range BuildTopology(cr.c, "").Nodes {
			if a := cr.net.Addr(NodeBroker, n); a != "" && !slices.Contains(hosts, a) {
				hosts = append(hosts, a)
			}
		}
		files, err := certs.EnsureServerCert(filepath.Join(cr.dir, "artemis-state"), hosts)
		if err != nil {
			return nil, fmt.Errorf("broker: artemis certificate: %w", err)
		}
		ks := filepath.Join(cr.dir, "artemis-state", "broker.p12")
		if err := artemis.KeyStore(files.Cert, files.Key, ks, "iotq-lab"); err != nil {
			return nil, fmt.Errorf("broker: %w", err)
		}
		o.TLSPort = transport.DefaultPort(transport.Scheme(endpoint.SchemeAMQPS))
		if cr.local() {
			p, err := freePort()
			if err != nil {
				return nil, err
			}
			o.TLSPort = p
		}
		o.KeyStore, o.KeyStorePassword = ks, "iotq-lab"
		cr.port, cr.ca = o.TLSPort, files.CA
	}
	cmd, err := artemis.Command(o)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	// the cell directory on the command line names the process in ps
	java, args := cmd.Path, append([]string{"-Diotq.lab.cell=" + cr.dir}, cmd.Args[1:]...)
	ready := make(chan struct{})
	onLine := func(line string) {
		if strings.TrimSpace(line) == artemis.ReadyLine {
			select {
			case <-ready:
			default:
				close(ready)
			}
		}
	}
	// stdin stays open for the cell: Artemis stops when it closes, so it
	// cannot outlive the lab even if the lab is killed.
	a, err := spawn(ctx, cr.net, java, NodeBroker, roleArtemis, cr.dir, "artemis", args, spawnOpts{stdin: true, onLine: onLine})
	if err != nil {
		return nil, err
	}
	t := time.NewTimer(cr.r.opts.ReadyTimeout + 30*time.Second) // a JVM on a loaded host
	defer t.Stop()
	select {
	case <-ready:
	case <-a.done:
		return nil, fmt.Errorf("broker: %w: %w", ErrNodeExited, a.failure())
	case <-ctx.Done():
		a.stop(5 * time.Second)
		return nil, ctx.Err()
	case <-t.C:
		a.stop(5 * time.Second)
		return nil, fmt.Errorf("broker: %w: artemis printed no %q: %s", ErrNotReady, artemis.ReadyLine, tailFile(a.stderrPath, 400))
	}
	bs := brokers{a}
	if scheme != TransportAMQPQUIC {
		return bs, nil
	}
	g, err := cr.startGateway(ctx, o.Port)
	if err != nil {
		bs.stop(5 * time.Second)
		return nil, err
	}
	return append(bs, g), nil
}

// startGateway starts iotq gateway in the broker's namespace: QUIC with
// ALPN amqp on the amqp+quic port, forwarded to Artemis on loopback.
// 0-RTT is accepted (early_data=accept): the resume variant measures it;
// in the lab nobody replays.
func (cr *cellRun) startGateway(ctx context.Context, upstreamPort int) (*child, error) {
	host, port := "0.0.0.0", transport.DefaultPort(transport.Scheme(endpoint.SchemeAMQPQUIC))
	if cr.local() {
		host, port = "127.0.0.1", 0
	}
	ready := filepath.Join(cr.dir, "gateway.ready.json")
	route := fmt.Sprintf("quic://%s?alpn=%s&early_data=accept=tcp://%s", net.JoinHostPort(host, fmt.Sprint(port)),
		endpoint.ALPNAMQP, net.JoinHostPort("127.0.0.1", fmt.Sprint(upstreamPort)))
	args := GatewayArgs{StateDir: filepath.Join(cr.dir, "gateway-state"), Routes: []string{route},
		ReadyFile: ready, LogFormat: "json", LogLevel: "warn"}
	g, err := spawn(ctx, cr.net, cr.r.opts.IOTQ, NodeBroker, roleGateway, cr.dir, "gateway", args.Argv(), spawnOpts{})
	if err != nil {
		return nil, err
	}
	data, err := waitReadyFile(ctx, ready, g, cr.r.opts.ReadyTimeout, func(b []byte) bool {
		_, err := records.ParseBrokerReady(b)
		return err == nil
	})
	if err != nil {
		g.stop(3 * time.Second)
		return nil, fmt.Errorf("gateway: %w", err)
	}
	br, _ := records.ParseBrokerReady(data)
	cr.ca, cr.port = br.CAFile, port
	for _, l := range br.Listeners {
		if ep, err := transport.ParseURL(l); err == nil && ep.Port != 0 {
			cr.port = ep.Port
		}
	}
	if cr.port == 0 || cr.ca == "" {
		g.stop(3 * time.Second)
		return nil, fmt.Errorf("gateway: ready file lists no listener with a port or no CA file: %s", data)
	}
	return g, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
