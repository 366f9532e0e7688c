package lab

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// child is one node process (broker, sub, pub).
type child struct {
	role, node string
	cmd        *exec.Cmd
	stderrPath string
	stdin      io.WriteCloser // set when the process reads its stdin from us
	done       chan struct{}  // closed when Wait returned
	waitErr    error
	outFile    *os.File
	errFile    *os.File
}

// spawnOpts select optional plumbing for a child.
type spawnOpts struct {
	stdin  bool         // give the child a pipe on stdin (child.stdin)
	onLine func(string) // called for every stdout line (from exec's copy goroutine)
}

// spawn starts args in node's namespace with stdout and stderr in
// dir/base.stdout and dir/base.stderr.
func spawn(ctx context.Context, n Network, iotq, node, role, dir, base string, args []string, o spawnOpts) (*child, error) {
	cmd := n.Command(ctx, node, iotq, args...)
	c := &child{role: role, node: node, cmd: cmd, done: make(chan struct{}),
		stderrPath: filepath.Join(dir, base+".stderr")}
	var err error
	if c.outFile, err = os.Create(filepath.Join(dir, base+".stdout")); err != nil {
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	if c.errFile, err = os.Create(c.stderrPath); err != nil {
		c.outFile.Close()
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	if o.onLine != nil {
		cmd.Stdout = &lineWriter{w: c.outFile, fn: o.onLine}
	} else {
		cmd.Stdout = c.outFile
	}
	cmd.Stderr = c.errFile
	if o.stdin {
		if c.stdin, err = cmd.StdinPipe(); err != nil {
			c.closeFiles()
			return nil, fmt.Errorf("%s: stdin: %w", role, err)
		}
	}
	// On cancellation ask politely first, so the child flushes its records.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 3 * time.Second
	if err := os.WriteFile(filepath.Join(dir, base+".cmd"), []byte(strings.Join(cmd.Args, " ")+"\n"), 0o644); err != nil {
		c.closeFiles()
		return nil, fmt.Errorf("%s: %w", role, err)
	}
	if err := cmd.Start(); err != nil {
		c.closeFiles()
		return nil, fmt.Errorf("start %s on node %s: %w", role, node, err)
	}
	go func() {
		c.waitErr = cmd.Wait()
		c.closeFiles()
		close(c.done)
	}()
	return c, nil
}

func (c *child) closeFiles() {
	if c.outFile != nil {
		c.outFile.Close()
	}
	if c.errFile != nil {
		c.errFile.Close()
	}
}

// exited reports whether the process has ended.
func (c *child) exited() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// wait waits up to d for the process to exit by itself.
func (c *child) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// stop ends the process: SIGINT, then SIGKILL after grace. It always
// waits for the process, so no child outlives its cell.
func (c *child) stop(grace time.Duration) {
	if c == nil || c.exited() {
		if c != nil {
			<-c.done
		}
		return
	}
	if c.stdin != nil {
		c.stdin.Close()
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-c.done:
		return
	case <-t.C:
	}
	_ = c.cmd.Process.Kill()
	<-c.done
}

// failure describes an unexpected exit with the tail of stderr.
func (c *child) failure() error {
	<-c.done
	tail := tailFile(c.stderrPath, 600)
	if c.waitErr != nil {
		return fmt.Errorf("%s (%s): %w: %s", c.role, c.node, c.waitErr, tail)
	}
	return fmt.Errorf("%s (%s) exited: %s", c.role, c.node, tail)
}

// rusage returns user and system CPU time in ns, once the process ended.
func (c *child) rusage() (user, sys int64, ok bool) {
	if !c.exited() || c.cmd.ProcessState == nil {
		return 0, 0, false
	}
	ru, ok := c.cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok || ru == nil {
		return 0, 0, false
	}
	return ru.Utime.Nano(), ru.Stime.Nano(), true
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no stderr)"
	}
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = append([]byte("..."), b[len(b)-n:]...)
	}
	if len(b) == 0 {
		return "(stderr empty)"
	}
	return strings.ReplaceAll(string(b), "\n", " | ")
}

// lineWriter copies to w and calls fn for every complete line.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	fn  func(string)
	buf []byte
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.w.Write(p)
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(l.buf[:i]), "\r")
		l.buf = l.buf[i+1:]
		l.fn(line)
	}
	return n, err
}

// waitReadyFile waits until path holds valid JSON, the child exits, or the
// timeout passes.
func waitReadyFile(ctx context.Context, path string, c *child, timeout time.Duration, valid func([]byte) bool) ([]byte, error) {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, err := os.ReadFile(path); err == nil && valid(b) {
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.done:
			return nil, fmt.Errorf("%w: %w", ErrNodeExited, c.failure())
		case <-deadline.C:
			return nil, fmt.Errorf("%w: %s (%s) wrote no ready file %s within %s: %s", ErrNotReady, c.role, c.node, path, timeout, tailFile(c.stderrPath, 400))
		case <-tick.C:
		}
	}
}
