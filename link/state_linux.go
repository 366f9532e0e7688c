package link

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/iotq/iotq/internal/atomicfile"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Info describes a running network: what a user needs to reach its nodes.
type Info struct {
	ID    string     `json:"id"`
	PID   int        `json:"pid"`
	Seed  uint64     `json:"seed"`
	Nodes []NodeInfo `json:"nodes"`
}

// NodeInfo describes one node of a running network.
type NodeInfo struct {
	Name       string            `json:"name"`
	Namespace  string            `json:"namespace,omitempty"` // empty: host namespace
	Addrs      map[string]string `json:"addrs"`               // link or medium -> address
	Interfaces map[string]string `json:"interfaces"`          // link or medium -> interface
}

// Info returns the network's description.
func (n *Network) Info() Info {
	in := Info{ID: n.id, PID: os.Getpid(), Seed: n.seed}
	for _, st := range n.order {
		ni := NodeInfo{Name: st.name, Namespace: st.ns, Addrs: map[string]string{}, Interfaces: map[string]string{}}
		for _, e := range st.eps {
			ni.Addrs[e.owner] = e.addr.String()
			ni.Interfaces[e.owner] = e.ifname
		}
		in.Nodes = append(in.Nodes, ni)
	}
	return in
}

// RunDir holds one state file per running "iotq link up".
const RunDir = "/run/iotq-link"

// RunState is what a running "iotq link up" publishes in RunDir.
type RunState struct {
	Info
	Prefix  string      `json:"prefix"`
	Started time.Time   `json:"started"`
	Updated time.Time   `json:"updated"`
	Stats   []LinkStats `json:"stats"`
}

// WriteRunState writes st to RunDir/<pid>.json atomically.
func WriteRunState(st RunState) error {
	if err := os.MkdirAll(RunDir, 0o755); err != nil {
		return fmt.Errorf("run state: %w", err)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return fmt.Errorf("run state: %w", err)
	}
	path := filepath.Join(RunDir, strconv.Itoa(st.PID)+".json")
	if err := atomicfile.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("run state: %w", err)
	}
	return nil
}

// RemoveRunState deletes the state file of pid.
func RemoveRunState(pid int) {
	_ = os.Remove(filepath.Join(RunDir, strconv.Itoa(pid)+".json")) // absent is fine
}

// RunStates reads the state of every live "iotq link up" and removes the
// files of dead ones.
func RunStates() ([]RunState, error) {
	ents, err := os.ReadDir(RunDir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("run states: %w", err)
	}
	var out []RunState
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSuffix(name, ".json"))
		if err != nil {
			continue
		}
		if !pidAlive(pid) {
			RemoveRunState(pid)
			continue
		}
		b, err := os.ReadFile(filepath.Join(RunDir, name))
		if err != nil {
			continue
		}
		var st RunState
		if json.Unmarshal(b, &st) == nil {
			out = append(out, st)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, nil
}

// StopRuns sends SIGTERM to every live "iotq link up" and waits up to wait
// for them to exit. It returns the pids that were asked to stop.
func StopRuns(wait time.Duration) ([]int, error) {
	runs, err := RunStates()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, r := range runs {
		if err := syscall.Kill(r.PID, syscall.SIGTERM); err == nil {
			pids = append(pids, r.PID)
		}
	}
	deadline := time.Now().Add(wait)
	for _, pid := range pids {
		for pidAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if pidAlive(pid) {
			return pids, fmt.Errorf("iotq link up (pid %d) did not stop within %v", pid, wait)
		}
	}
	return pids, nil
}
