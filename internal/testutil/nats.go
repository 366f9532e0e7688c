package testutil

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// NATSServerVersion is the nats-server release the cluster tests run
// (scripts/setup.sh installs it with go install, pinned).
const NATSServerVersion = "v2.15.2"

// NATSNode is one nats-server process of a NATSCluster.
type NATSNode struct {
	Name        string // server_name
	Port        int    // NATS client port on 127.0.0.1
	ClusterPort int    // route port
	MQTTPort    int    // MQTT 3.1.1 listener
	MonitorPort int    // HTTP monitoring (/healthz, /jsz)
	Dir         string // configuration, log and JetStream store
	PID         int

	exited   chan struct{}
	killOnce sync.Once
	kill     func()
}

// MQTTAddr is 127.0.0.1:PORT of the node's MQTT listener.
func (n *NATSNode) MQTTAddr() string { return fmt.Sprintf("127.0.0.1:%d", n.MQTTPort) }

// Log returns what the node logged so far.
func (n *NATSNode) Log() string {
	b, _ := os.ReadFile(filepath.Join(n.Dir, "nats.log"))
	return string(b)
}

// Kill kills the node (SIGKILL to its PID only: no graceful leave, as when
// a machine dies) and waits for it to exit. Idempotent.
func (n *NATSNode) Kill() { n.killOnce.Do(n.kill) }

// Exited reports whether the process has ended.
func (n *NATSNode) Exited() bool {
	select {
	case <-n.exited:
		return true
	default:
		return false
	}
}

// NATSCluster is a cluster of nats-server processes started by a test, each
// with JetStream and its MQTT listener on.
type NATSCluster struct {
	Nodes []*NATSNode
}

// MQTTUpstreams returns tcp://HOST:PORT of every node's MQTT listener (the
// form of a gateway route's upstreams).
func (c *NATSCluster) MQTTUpstreams() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = "tcp://" + n.MQTTAddr()
	}
	return out
}

// NATSServer returns the path of nats-server NATSServerVersion: from PATH,
// $GOBIN or $(go env GOPATH)/bin. When it is missing (or another version)
// the test is skipped with the command that installs it, or fails under
// CI=true.
func NATSServer(t testing.TB) string {
	t.Helper()
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
	var seen []string
	for _, p := range cands {
		out, err := exec.Command(p, "--version").Output()
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(out))
		if v == "nats-server: "+NATSServerVersion {
			return p
		}
		seen = append(seen, fmt.Sprintf("%s is %q", p, v))
	}
	msg := fmt.Sprintf("nats-server %s not installed (go install github.com/nats-io/nats-server/v2@%s; scripts/setup.sh installs it)", NATSServerVersion, NATSServerVersion)
	if len(seen) > 0 {
		msg += "; found " + strings.Join(seen, ", ")
	}
	SkipOrFail(t, "%s", msg)
	return ""
}

// StartNATSCluster starts n nats-server processes (1 to 5) on free
// loopback ports, each with JetStream (store in a t.TempDir()), its MQTT
// listener (MQTT's streams replicated on min(n, 3) nodes; an unacknowledged
// QoS 1 delivery is sent again after 5 s, not NATS's default 30 s, so a
// test's failover completes quickly) and routes to all
// the others, and waits until every node is healthy, JetStream has a meta
// leader and every MQTT listener accepts. Each node can be killed alone
// (NATSNode.Kill); t.Cleanup kills the rest, by PID. Without nats-server
// NATSServerVersion it skips, or fails under CI=true.
func StartNATSCluster(t testing.TB, n int) *NATSCluster {
	t.Helper()
	if n < 1 || n > 5 {
		t.Fatalf("StartNATSCluster: %d nodes; want 1 to 5", n)
	}
	bin := NATSServer(t)
	c := &NATSCluster{}
	for i := range n {
		c.Nodes = append(c.Nodes, &NATSNode{
			Name: fmt.Sprintf("n%d", i), Port: FreePort(t), ClusterPort: FreePort(t),
			MQTTPort: FreePort(t), MonitorPort: FreePort(t), Dir: t.TempDir(),
			exited: make(chan struct{}),
		})
	}
	replicas := min(n, 3)
	for _, nd := range c.Nodes {
		var routes []string
		for _, o := range c.Nodes {
			if o != nd {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", o.ClusterPort))
			}
		}
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\nhttp: 127.0.0.1:%d\n", nd.Name, nd.Port, nd.MonitorPort) +
			fmt.Sprintf("jetstream {\n  store_dir: %q\n  max_memory_store: 64MB\n  max_file_store: 1GB\n}\n", filepath.Join(nd.Dir, "js")) +
			fmt.Sprintf("mqtt {\n  listen: 127.0.0.1:%d\n  stream_replicas: %d\n  ack_wait: 5s\n}\n", nd.MQTTPort, replicas)
		if n > 1 {
			conf += fmt.Sprintf("cluster {\n  name: iotq-test\n  listen: 127.0.0.1:%d\n  routes: [%s]\n}\n", nd.ClusterPort, strings.Join(routes, ", "))
		}
		cf := filepath.Join(nd.Dir, "nats.conf")
		if err := os.WriteFile(cf, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(nd.Dir, "nats.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-c", cf)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			logf.Close()
			t.Fatalf("start nats-server %s: %v", nd.Name, err)
		}
		nd.PID = cmd.Process.Pid
		go func() { _ = cmd.Wait(); logf.Close(); close(nd.exited) }()
		nd.kill = func() { _ = cmd.Process.Kill(); <-nd.exited }
		t.Cleanup(func() {
			nd.Kill()
			if t.Failed() {
				t.Logf("nats-server %s log (tail):\n%s", nd.Name, tail(nd.Log(), 40))
			}
		})
	}
	c.WaitReady(t, 60*time.Second)
	return c
}

// WaitReady waits until every node still running reports healthy
// (/healthz), agrees on a JetStream meta leader among the running nodes,
// and accepts on its MQTT port; it fails the test after timeout (scaled).
func (c *NATSCluster) WaitReady(t testing.TB, timeout time.Duration) {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	Eventually(t, timeout, func() error {
		alive := map[string]bool{}
		for _, nd := range c.Nodes {
			if !nd.Exited() {
				alive[nd.Name] = true
			}
		}
		for _, nd := range c.Nodes {
			if !alive[nd.Name] {
				continue
			}
			if err := nd.ready(hc, alive, len(c.Nodes) > 1); err != nil {
				return err
			}
		}
		return nil
	})
}

// MetaLeader returns the name of the JetStream meta leader as the first
// running node sees it ("" if none).
func (c *NATSCluster) MetaLeader() string {
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, nd := range c.Nodes {
		if nd.Exited() {
			continue
		}
		if j, err := nd.jsz(hc); err == nil {
			return j.Meta.Leader
		}
	}
	return ""
}

// Connections returns the number of client connections (MQTT sessions
// included) the node holds, from its /connz.
func (n *NATSNode) Connections() (int, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/connz", n.MonitorPort))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var c struct {
		Num int `json:"num_connections"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		return 0, fmt.Errorf("%s /connz: %w", n.Name, err)
	}
	return c.Num, nil
}

// Leaders returns the leader of JetStream's meta group (key "meta") and of
// every stream (key: its name, e.g. $MQTT_sess) as the first running node
// reports them; nil if no node answers.
func (c *NATSCluster) Leaders() map[string]string {
	hc := &http.Client{Timeout: 2 * time.Second}
	for _, nd := range c.Nodes {
		if nd.Exited() {
			continue
		}
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz?accounts=true&streams=true", nd.MonitorPort))
		if err != nil {
			continue
		}
		var j struct {
			jsz
			Accounts []struct {
				Streams []struct {
					Name    string `json:"name"`
					Cluster struct {
						Leader string `json:"leader"`
					} `json:"cluster"`
				} `json:"stream_detail"`
			} `json:"account_details"`
		}
		err = json.NewDecoder(resp.Body).Decode(&j)
		resp.Body.Close()
		if err != nil {
			continue
		}
		out := map[string]string{"meta": j.Meta.Leader}
		for _, a := range j.Accounts {
			for _, s := range a.Streams {
				out[s.Name] = s.Cluster.Leader
			}
		}
		return out
	}
	return nil
}

type jsz struct {
	Meta struct {
		Leader      string `json:"leader"`
		ClusterSize int    `json:"cluster_size"`
	} `json:"meta_cluster"`
}

func (n *NATSNode) jsz(hc *http.Client) (jsz, error) {
	var j jsz
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/jsz", n.MonitorPort))
	if err != nil {
		return j, err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return j, fmt.Errorf("%s /jsz: %w", n.Name, err)
	}
	return j, nil
}

// ready checks one node: health, a live meta leader, the MQTT listener.
func (n *NATSNode) ready(hc *http.Client, alive map[string]bool, clustered bool) error {
	if n.Exited() {
		return fmt.Errorf("nats-server %s exited; log:\n%s", n.Name, tail(n.Log(), 20))
	}
	resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.MonitorPort))
	if err != nil {
		return fmt.Errorf("nats-server %s monitoring: %w", n.Name, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("nats-server %s /healthz: %s", n.Name, resp.Status)
	}
	if clustered {
		j, err := n.jsz(hc)
		if err != nil {
			return err
		}
		if j.Meta.Leader == "" || !alive[j.Meta.Leader] {
			return fmt.Errorf("nats-server %s: no live JetStream meta leader yet (sees %q)", n.Name, j.Meta.Leader)
		}
	}
	conn, err := net.DialTimeout("tcp", n.MQTTAddr(), time.Second)
	if err != nil {
		return fmt.Errorf("nats-server %s MQTT listener: %w", n.Name, err)
	}
	return conn.Close()
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}
