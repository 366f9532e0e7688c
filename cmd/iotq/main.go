// Command iotq is the single binary of the iotq project: broker, clients,
// link emulator, lab and report. This file only wires subcommands; each
// subcommand lives in its own file and calls into the library packages.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Exit codes shared by every subcommand.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// errUsage marks an error as a usage error (exit code 2).
var errUsage = errors.New("usage error")

// usageErrorf returns an error that makes the command exit with code 2.
func usageErrorf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, args...))
}

// Command is one subcommand of iotq (the cmd/go shape, with caddy's
// (int, error) result so exit codes are testable without os.Exit).
type Command struct {
	Name      string
	UsageLine string // e.g. "iotq broker [flags]"
	Short     string // lowercase phrase, no period
	Long      string // explains every flag in prose
	// Flags holds the command's flags (newFlagSet); app.run parses the
	// command line into it before Run, help prints it.
	Flags *flag.FlagSet
	// Run runs the command with the arguments left after the flags and
	// returns the exit code (exitOK, exitFailure, exitUsage or a code of
	// its own) and the error to print, if any.
	Run func(ctx context.Context, args []string) (int, error)
}

// newFlagSet returns an empty flag set for command name, errors returned
// rather than printed.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseSub parses the flags of a subcommand (link shell, lab run, ...).
// -h/--help returns flag.ErrHelp itself, which run turns into the
// command's help on standard output and exit 0; other problems are usage
// errors naming the subcommand.
func parseSub(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		return flag.ErrHelp
	default:
		return usageErrorf("%s: %v", fs.Name(), explainFlagError(fs, err))
	}
}

// explainFlagError adds to flag's "invalid value" errors what to write
// instead: a duration needs its unit, a count is a whole number.
func explainFlagError(fs *flag.FlagSet, err error) error {
	msg := err.Error()
	_, rest, ok := strings.Cut(msg, " for flag -")
	if !ok || !strings.HasPrefix(msg, "invalid value") {
		return err
	}
	name, _, _ := strings.Cut(rest, ":")
	f := fs.Lookup(name)
	if f == nil {
		return err
	}
	g, ok := f.Value.(flag.Getter)
	if !ok {
		return err
	}
	switch g.Get().(type) {
	case time.Duration:
		return fmt.Errorf("%w (write a duration with its unit: 2s, 500ms, 1m30s)", err)
	case int, int64, uint, uint64:
		if n, ok := withUnit(flagValue(msg)); ok {
			hint := fmt.Sprintf("write a whole number without units: -%s %d", name, n)
			if name == "size" && n > maxMQTTPacket {
				hint += fmt.Sprintf("; but an MQTT packet carries at most %d bytes (256 MiB)", maxMQTTPacket)
			}
			return fmt.Errorf("%w (%s)", err, hint)
		}
		return fmt.Errorf("%w (write a whole number, e.g. -%s 300; no units)", err, name)
	case float64:
		return fmt.Errorf("%w (write a number, e.g. -%s 0.5)", err, name)
	}
	return err
}

// maxMQTTPacket is MQTT's largest packet (a 4-byte remaining length).
const maxMQTTPacket = 268435455

// flagValue returns VALUE of flag's `invalid value "VALUE" for flag -x`.
func flagValue(msg string) string {
	_, rest, _ := strings.Cut(msg, `invalid value "`)
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// withUnit reads a count written with a unit (300MB, 64KiB, 2k) as the
// number it means, so the hint can give the value to write instead.
func withUnit(v string) (int64, bool) {
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i <= 0 {
		return 0, false
	}
	x, err := strconv.ParseFloat(v[:i], 64)
	if err != nil {
		return 0, false
	}
	mult := map[string]float64{"k": 1e3, "K": 1e3, "KB": 1e3, "kB": 1e3, "M": 1e6, "MB": 1e6, "G": 1e9, "GB": 1e9,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "B": 1}[strings.TrimSpace(v[i:])]
	if mult == 0 {
		return 0, false
	}
	return int64(x * mult), true
}

// runE adapts a run function that reports usage problems with usageErrorf
// and other exit codes with *exitError to Command.Run.
func runE(f func(ctx context.Context, args []string) error) func(context.Context, []string) (int, error) {
	return func(ctx context.Context, args []string) (int, error) {
		err := f(ctx, args)
		return exitCode(err), err
	}
}

// exitCode maps an error to the exit code: 0 for nil, exitUsage for
// usageErrorf, the code of an *exitError, exitFailure otherwise.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, errUsage):
		return exitUsage
	}
	return exitFailure
}

// app holds the command table and the standard streams, so tests can run
// commands in-process without touching os.Stdout.
type app struct {
	commands []*Command
	stdout   io.Writer
	stderr   io.Writer
	stdin    *os.File // a file, not a reader: broker passwd asks whether it is a terminal
}

func newApp(stdout, stderr io.Writer) *app {
	a := &app{stdout: stdout, stderr: stderr, stdin: os.Stdin}
	a.commands = a.commandTable()
	return a
}

func (a *app) lookup(name string) *Command {
	for _, c := range a.commands {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func (a *app) printHelp(w io.Writer) {
	fmt.Fprintf(w, "iotq: IoT messaging over QUIC, and the evidence for it.\n\nUsage:\n\n\tiotq <command> [arguments]\n\nThe commands are:\n\n")
	for _, c := range a.commands {
		fmt.Fprintf(w, "\t%-10s %s\n", c.Name, c.Short)
	}
	fmt.Fprintf(w, "\nUse \"iotq help <command>\" for more information about a command.\n")
}

func (a *app) printCommandHelp(w io.Writer, c *Command) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.UsageLine, strings.TrimSpace(c.Long))
	if c.Flags == nil {
		return
	}
	n := 0
	c.Flags.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nFlags:\n")
		c.Flags.SetOutput(w)
		c.Flags.PrintDefaults()
		c.Flags.SetOutput(io.Discard)
	}
}

// run executes one iotq invocation and returns its exit code.
func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.printHelp(a.stderr)
		return exitUsage
	}
	name := args[0]
	if name == "--version" || name == "-version" {
		name, args = "version", append([]string{"version"}, args[1:]...)
	}
	switch name {
	case "help", "-h", "--help", "-help":
		if len(args) > 1 {
			c := a.lookup(args[1])
			if c == nil {
				fmt.Fprintf(a.stderr, "iotq help %s: unknown command. Run 'iotq help'.\n", args[1])
				return exitUsage
			}
			a.printCommandHelp(a.stdout, c)
			return exitOK
		}
		a.printHelp(a.stdout)
		return exitOK
	}
	c := a.lookup(name)
	if c == nil {
		fmt.Fprintf(a.stderr, "iotq: unknown command %q\nRun 'iotq help' for usage.\n", name)
		return exitUsage
	}
	rest := args[1:]
	if n := len(rest); n > 0 && rest[n-1] == "-h" && c.Flags != nil && c.Flags.Lookup("h") != nil {
		// pub and sub take mosquitto's -h HOST; a bare trailing -h still
		// asks for help, as it does everywhere else.
		rest = append(rest[:n-1:n-1], "--help")
	}
	if c.Flags != nil {
		if err := c.Flags.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				a.printCommandHelp(a.stdout, c)
				return exitOK
			}
			fmt.Fprintf(a.stderr, "iotq %s: %v\nRun 'iotq help %s' for usage.\n", c.Name, explainFlagError(c.Flags, err), c.Name)
			return exitUsage
		}
		rest = c.Flags.Args()
	}
	code, err := c.Run(ctx, rest)
	if errors.Is(err, flag.ErrHelp) { // a subcommand's -h/--help
		a.printCommandHelp(a.stdout, c)
		return exitOK
	}
	if err != nil {
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			if ee.msg != "" {
				fmt.Fprintf(a.stderr, "iotq %s: %s\n", c.Name, ee.msg)
			}
		case code == exitUsage:
			fmt.Fprintf(a.stderr, "iotq %s: %s\nRun 'iotq help %s' for usage.\n", c.Name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "), c.Name)
		default:
			fmt.Fprintf(a.stderr, "iotq %s: %v\n", c.Name, err)
		}
	}
	return code
}

// exitError carries a specific exit code (for example the exit code of a
// command run inside an emulated link).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

func main() {
	ctx, stop := signalContext()
	code := newApp(os.Stdout, os.Stderr).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
