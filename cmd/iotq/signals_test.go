package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

const signalHelperEnv = "IOTQ_TEST_SIGNAL_HELPER"

// TestSignalHelper is the child of TestSecondSignalExits: a command whose
// clean stop never ends.
func TestSignalHelper(t *testing.T) {
	if os.Getenv(signalHelperEnv) != "1" {
		t.Skip("run by TestSecondSignalExits")
	}
	ctx, stop := signalContext()
	defer stop()
	fmt.Println("ready")
	<-ctx.Done()
	fmt.Println("stopping")
	time.Sleep(time.Minute) // a teardown that hangs
	fmt.Println("still here")
}

// TestSecondSignalExits: the first SIGINT cancels the command's context and
// the process stays to stop cleanly; a second SIGINT ends it at once, by
// the signal, however stuck the clean stop is.
func TestSecondSignalExits(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalHelper$", "-test.count=1")
	cmd.Env = append(os.Environ(), signalHelperEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // gone already when the test passes
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case l := <-lines:
			if l != want {
				t.Fatalf("child said %q, want %q", l, want)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("child did not say %q within 20 s", want)
		}
	}
	expect("ready")
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	expect("stopping")
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		t.Fatalf("the first SIGINT ended the process (%v); it should stay to stop cleanly", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("child exited with %v, want death by SIGINT", err)
		}
		ws, ok := ee.Sys().(syscall.WaitStatus)
		if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGINT {
			t.Fatalf("child ended with %v, want death by SIGINT", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the second SIGINT did not end the process within 20 s")
	}
}
