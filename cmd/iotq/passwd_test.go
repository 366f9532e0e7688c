package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sys/unix"
)

// TestBrokerPasswdFromPipe: standard input that is not a terminal gives
// the password as its first line, without a prompt (scripts).
func TestBrokerPasswdFromPipe(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fmt.Fprintln(w, "piped secret")
	w.Close()
	var so, se syncBuffer
	a := newApp(&so, &se)
	a.stdin = r
	if code := a.run(context.Background(), []string{"broker", "passwd", file, "alice"}); code != exitOK {
		t.Fatalf("exit %d: %s", code, se.String())
	}
	if strings.Contains(se.String(), "Password:") {
		t.Errorf("prompted on a pipe: %q", se.String())
	}
	checkHash(t, file, "alice", "piped secret")
}

// TestBrokerPasswdTerminalNoEcho: on a terminal (a pseudo-terminal here)
// broker passwd asks twice with echo off: what is typed never comes back
// on the terminal, and the file holds its hash. Two different answers
// change nothing.
func TestBrokerPasswdTerminalNoEcho(t *testing.T) {
	file := filepath.Join(t.TempDir(), "passwd")
	run := func(first, second string) (int, string, string) {
		master, slave := openPTY(t)
		defer master.Close()
		defer slave.Close()
		var so, se syncBuffer
		a := newApp(&so, &se)
		a.stdin = slave
		done := make(chan int, 1)
		go func() { done <- a.run(context.Background(), []string{"broker", "passwd", file, "bob"}) }()
		for i, line := range []string{first, second} {
			// Type only once the prompt is out and echo is off (the
			// line discipline echoes at input time; the first read
			// restores echo before the second prompt).
			waitFor(t, func() bool { return strings.Count(se.String(), "assword: ") > i })
			waitFor(t, func() bool { return !echoOn(t, slave) })
			if _, err := master.WriteString(line + "\r"); err != nil {
				t.Fatal(err)
			}
		}
		var code int
		select {
		case code = <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("broker passwd did not return")
		}
		return code, readAvailable(t, master), se.String()
	}

	code, screen, stderr := run("typed secret", "typed secret")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(screen, "typed") {
		t.Errorf("the password was echoed on the terminal: %q", screen)
	}
	if !strings.Contains(stderr, "Password: ") || !strings.Contains(stderr, "Reenter password: ") {
		t.Errorf("no prompts on stderr: %q", stderr)
	}
	checkHash(t, file, "bob", "typed secret")

	before, _ := os.ReadFile(file)
	code, _, stderr = run("one", "other")
	if code != exitFailure || !strings.Contains(stderr, "the passwords differ") {
		t.Errorf("different answers: exit %d, stderr %q; want 1 and the passwords differ", code, stderr)
	}
	if after, _ := os.ReadFile(file); !bytes.Equal(before, after) {
		t.Error("the file changed although the passwords differ")
	}
}

func checkHash(t *testing.T, file, user, password string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if u, hash, ok := strings.Cut(line, ":"); ok && u == user {
			if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)); err != nil {
				t.Errorf("hash of %s does not match %q: %v", user, password, err)
			}
			return
		}
	}
	t.Errorf("%s not in %s: %q", user, file, b)
}

// openPTY opens a pseudo-terminal pair (/dev/ptmx and its /dev/pts slave).
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open /dev/ptmx: %v", err)
	}
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("pty number: %v", err)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pty slave: %v", err)
	}
	return master, slave
}

func echoOn(t *testing.T, f *os.File) bool {
	t.Helper()
	tio, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return tio.Lflag&unix.ECHO != 0
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// readAvailable returns what the terminal shows (what the master can read
// now), waiting briefly for output still on its way. poll(2), not read
// deadlines: the pty master is a blocking file here.
func readAvailable(t *testing.T, master *os.File) string {
	t.Helper()
	var out []byte
	buf := make([]byte, 4096)
	fd := int(master.Fd())
	for {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 200)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			t.Fatalf("poll pty master: %v", err)
		}
		if n == 0 || fds[0].Revents&unix.POLLIN == 0 {
			return string(out)
		}
		m, err := unix.Read(fd, buf)
		if err != nil {
			t.Fatalf("read pty master: %v", err)
		}
		out = append(out, buf[:m]...)
	}
}
