package protonbroker

import (
	_ "embed"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

//go:embed broker.py
var script string

// Script returns broker.py, the broker's source.
func Script() string { return script }

// ErrNotInstalled: no Python that imports proton (python3-qpid-proton).
var ErrNotInstalled = errors.New("python3-qpid-proton not installed")

// Pythons are the interpreters Python tries, in order: Debian's
// /usr/bin/python3 (python3-qpid-proton is installed for it) first, then
// python3 on PATH.
func Pythons() []string { return []string{"/usr/bin/python3", "python3"} }

// Python returns an interpreter that imports proton, or ErrNotInstalled
// saying what to install.
func Python() (string, error) {
	var errs []error
	for _, py := range Pythons() {
		out, err := exec.Command(py, "-c", "import proton.reactor, proton.handlers").CombinedOutput()
		if err == nil {
			return py, nil
		}
		errs = append(errs, fmt.Errorf("%s: %w: %s", py, err, strings.TrimSpace(lastLine(string(out)))))
	}
	return "", fmt.Errorf("%w (%v); run scripts/setup.sh or apt-get install python3-qpid-proton", ErrNotInstalled, errors.Join(errs...))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// Options of one broker process. Zero values: 127.0.0.1, a free port, no
// TLS listener, SASL ANONYMOUS and PLAIN (any user), credit 100.
type Options struct {
	Host string // address to bind (loopback or a namespace's address)
	Port int    // AMQP over TCP; 0: a free port (see the ready line)
	// TLS adds an AMQP-over-TLS listener on TLSPort (0: a free port) with
	// the PEM certificate chain CertFile and key KeyFile.
	TLS      bool
	TLSPort  int
	CertFile string
	KeyFile  string
	// Mechs are the SASL mechanisms offered (default ANONYMOUS PLAIN).
	Mechs []string
	// Users are the PLAIN user names and passwords; none: any accepted.
	Users map[string]string
	// Credit is the link credit a sending client gets (default 100).
	Credit int
	// RejectPrefix: unsettled transfers to an address starting with it
	// are rejected (empty: none).
	RejectPrefix string
	// StopOnEOF stops the broker when its standard input closes.
	StopOnEOF bool
	// Verbose logs connections' errors and links to standard error.
	Verbose bool
}

// Command returns the command that runs the broker (not started); it
// prints "ready PORT [TLS-PORT]" once it listens. It fails with
// ErrNotInstalled when no Python imports proton.
func Command(o Options) (*exec.Cmd, error) {
	py, err := Python()
	if err != nil {
		return nil, err
	}
	if o.Host == "" {
		o.Host = "127.0.0.1"
	}
	args := []string{"-c", script, "--host", o.Host, "--port", strconv.Itoa(o.Port)}
	if o.TLS {
		if o.CertFile == "" || o.KeyFile == "" {
			return nil, errors.New("protonbroker: a TLS listener needs CertFile and KeyFile")
		}
		args = append(args, "--tls-port", strconv.Itoa(o.TLSPort), "--cert", o.CertFile, "--key", o.KeyFile)
	}
	if len(o.Mechs) > 0 {
		args = append(args, "--mechs", strings.Join(o.Mechs, " "))
	}
	for u, pw := range o.Users {
		if strings.Contains(u, ":") {
			return nil, fmt.Errorf("protonbroker: user name %q has a colon", u)
		}
		args = append(args, "--user", u+":"+pw)
	}
	if o.Credit != 0 {
		args = append(args, "--credit", strconv.Itoa(o.Credit))
	}
	if o.RejectPrefix != "" {
		args = append(args, "--reject-prefix", o.RejectPrefix)
	}
	if o.StopOnEOF {
		args = append(args, "--stop-on-eof")
	}
	if o.Verbose {
		args = append(args, "--verbose")
	}
	return exec.Command(py, args...), nil
}

// ParseReady parses the broker's ready line: "ready PORT [TLS-PORT]".
func ParseReady(line string) (port, tlsPort int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f) > 3 || f[0] != "ready" {
		return 0, 0, false
	}
	port, err := strconv.Atoi(f[1])
	if err != nil || port <= 0 {
		return 0, 0, false
	}
	if len(f) == 3 {
		if tlsPort, err = strconv.Atoi(f[2]); err != nil || tlsPort <= 0 {
			return 0, 0, false
		}
	}
	return port, tlsPort, true
}
