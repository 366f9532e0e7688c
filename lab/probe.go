package lab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProbeLoop is the host probe's body: an ordinary timer of period every
// whose lateness, read on the clock after the goroutine runs again, it
// writes to w as one decimal number of nanoseconds per line, until ctx
// ends or a write fails. `iotq lab probe` runs it in a process of its
// own, so that it is scheduled like the node processes (broker, pub,
// sub) and not like the lab process, whose other threads run real-time
// and whose runtime also serves the emulators.
func ProbeLoop(ctx context.Context, every time.Duration, w io.Writer) error {
	if every <= 0 {
		return fmt.Errorf("probe period %s: want a positive duration such as 10ms", every)
	}
	bw := bufio.NewWriter(w)
	t := time.NewTimer(every)
	defer t.Stop()
	want := time.Now().Add(every)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			// The time received is when the timer was due (the runtime
			// back-dates it), not when this goroutine ran: the wake-up
			// delay is only seen on the clock, now.
			late := time.Since(want)
			want = time.Now().Add(every)
			t.Reset(every)
			bw.WriteString(strconv.FormatInt(int64(late), 10))
			bw.WriteByte('\n')
			if err := bw.Flush(); err != nil {
				return fmt.Errorf("probe: writing a sample: %w", err)
			}
		}
	}
}

// startProbeProcess runs cmd (a program running ProbeLoop, such as
// `iotq lab probe --every 10ms`) as a child process and passes record
// each lateness it prints. The child dies with the lab (parent-death
// signal). stop ends it and waits for it and the reader; it reports a
// child that could not start or printed something else than samples.
func startProbeProcess(cmd []string, record func(time.Duration)) (stop func() error, err error) {
	if len(cmd) == 0 {
		return nil, errors.New("probe: no command")
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Cancel = func() error { return c.Process.Signal(syscall.SIGTERM) }
	c.WaitDelay = 2 * time.Second
	// A process group of its own: a Ctrl-C (or timeout's signal) to the
	// lab's group must not end the probe before the lab has written its
	// records; the lab stops it, and its parent-death signal covers a lab
	// that dies.
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	var stderr strings.Builder
	c.Stderr = &limitedWriter{w: &stderr, n: 4096}
	out, err := c.StdoutPipe()
	if err != nil {
		cancel()
		return nil, fmt.Errorf("probe: %w", err)
	}
	// The parent-death signal fires when the thread that started the
	// child exits, and the runtime ends a thread that a goroutine leaves
	// locked (an emulator's forwarding thread does): start and wait for
	// the child on a thread of its own that lives as long as the child.
	started := make(chan error, 1)
	waited := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := c.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		waited <- c.Wait()
	}()
	if err := <-started; err != nil {
		cancel()
		return nil, fmt.Errorf("probe: starting %q: %w", strings.Join(cmd, " "), err)
	}
	var (
		wg      sync.WaitGroup
		readErr error
		early   bool // the child's output ended before stop
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			ns, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil {
				readErr = fmt.Errorf("probe: %q printed %q, not a lateness in nanoseconds", strings.Join(cmd, " "), sc.Text())
				cancel()
				break
			}
			record(time.Duration(ns))
		}
		early = ctx.Err() == nil
		_, _ = io.Copy(io.Discard, out)
	}()
	return func() error {
		cancel()
		wg.Wait()
		werr := <-waited
		switch {
		case readErr != nil:
			return readErr
		case early:
			return fmt.Errorf("probe: %q ended before the campaign did (%v): %s", strings.Join(cmd, " "), werr, strings.TrimSpace(stderr.String()))
		}
		return nil
	}, nil
}

// limitedWriter keeps the first n bytes written to it.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		_, _ = l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
