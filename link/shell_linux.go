package link

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// ShellConfig configures Shell: one emulated link between a fresh
// namespace ("shell") and the host namespace ("host").
type ShellConfig struct {
	// Up is the direction from the shell to the host, Down the other.
	Up, Down Params
	// Direction says which of them carries its impairment: both (the
	// default), up (from the shell to the host only: the shell's egress)
	// or down (from the host to the shell only). The other direction is
	// clean (no delay, loss or rate), but counted.
	Direction Direction
	// CongestionControl is pinned in the shell's namespace (empty: default).
	CongestionControl string
	// Pcap, when set, receives a capture of the shell's interface.
	Pcap string
	// Options for Up (Prefix, Logger, Seed, NoRealTime); CaptureDir and
	// CongestionControl are ignored.
	Options Options
	// Stdin, Stdout, Stderr of the command; nil means the process's own.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is added to the command's environment.
	Env []string
}

// ShellResult is what Shell reports after the command exits.
type ShellResult struct {
	ExitCode          int
	Stats             []LinkStats
	Ends              []EndStats // kernel counters of both link ends
	HostAddr          string
	ShellAddr         string
	CongestionControl string
	RealTime          bool
	Seed              uint64
}

// ShellHostAddrEnv is the variable that holds, inside the shell, the host's
// address on the emulated link.
const ShellHostAddrEnv = "IOTQ_HOST_ADDR"

// Shell runs argv inside a fresh namespace whose only route leads through
// an emulated link to the host namespace, then tears everything down. The
// command's exit code is in the result (128+signal if it was killed).
// Cancelling ctx sends SIGTERM to the command (SIGKILL 5 s later).
func Shell(ctx context.Context, cfg ShellConfig, argv []string) (ShellResult, error) {
	var res ShellResult
	if len(argv) == 0 {
		return res, errors.New("no command given: put it after --, for example -- sh")
	}
	opts := cfg.Options
	opts.CaptureDir = ""
	opts.CongestionControl = ""
	var capDir string
	if cfg.Pcap != "" {
		dir, err := os.MkdirTemp(filepath.Dir(cfg.Pcap), ".iotq-pcap-")
		if err != nil {
			return res, fmt.Errorf("pcap: %w", err)
		}
		capDir = dir
		defer os.RemoveAll(capDir)
		opts.CaptureDir = capDir
	}
	topo := Topology{
		Nodes: []Node{{Name: "host", Host: true}, {Name: "shell", CongestionControl: cfg.CongestionControl}},
		Links: []Link{{Name: "shell", A: "host", B: "shell", AtoB: cfg.Down, BtoA: cfg.Up, Direction: cfg.Direction.reverse()}},
	}
	setupCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	n, err := Up(setupCtx, topo, opts)
	cancel()
	if err != nil {
		return res, err
	}
	defer n.Close()
	res.HostAddr = n.AddrOn("host", "shell").String()
	res.ShellAddr = n.AddrOn("shell", "shell").String()
	res.Seed = n.Seed()
	res.RealTime, _ = n.RealTime()
	if cc, err := n.CongestionControl("shell"); err == nil {
		res.CongestionControl = cc
	}
	cmd := n.Command(context.Background(), "shell", argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), ShellHostAddrEnv+"="+res.HostAddr, "IOTQ_SHELL_ADDR="+res.ShellAddr)
	cmd.Env = append(cmd.Env, cfg.Env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cfg.Stdin, cfg.Stdout, cfg.Stderr
	if cmd.Stdin == nil {
		cmd.Stdin = os.Stdin
	}
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return res, fmt.Errorf("start %s: %w", argv[0], err)
	}
	waitc := make(chan error, 1)
	go func() { waitc <- cmd.Wait() }()
	var werr error
	select {
	case werr = <-waitc:
	case <-ctx.Done():
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case werr = <-waitc:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			werr = <-waitc
		}
	}
	res.ExitCode = exitCode(cmd, werr)
	res.Stats = n.Stats()
	res.Ends, _ = n.EndStats() // informative only: a failure leaves it empty
	if err := n.Close(); err != nil {
		return res, err
	}
	if cfg.Pcap != "" {
		if err := os.Rename(filepath.Join(capDir, "shell-shell.pcap"), cfg.Pcap); err != nil {
			return res, fmt.Errorf("pcap: %w", err)
		}
	}
	return res, nil
}

// reverse swaps up and down: the shell is B of its link, so the shell's
// "up" is the link's B to A.
func (d Direction) reverse() Direction {
	switch d {
	case DirectionUp:
		return DirectionDown
	case DirectionDown:
		return DirectionUp
	}
	return d
}

func exitCode(cmd *exec.Cmd, err error) int {
	if err == nil {
		return 0
	}
	if ps := cmd.ProcessState; ps != nil {
		if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		if c := ps.ExitCode(); c >= 0 {
			return c
		}
	}
	return 1
}
