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
	"os/signal"
	"sort"
	"strings"
	"syscall"
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

// Command is one subcommand of iotq.
type Command struct {
	Name      string
	UsageLine string // e.g. "iotq broker [flags]"
	Short     string // lowercase phrase, no period
	Long      string // explains every flag in prose
	// Flags registers the command's flags on fs and returns the function
	// that runs the command once fs has been parsed.
	Flags func(fs *flag.FlagSet) func(ctx context.Context, args []string) error
}

// app holds the command table and the standard streams, so tests can run
// commands in-process without touching os.Stdout.
type app struct {
	commands []*Command
	stdout   io.Writer
	stderr   io.Writer
}

func newApp(stdout, stderr io.Writer) *app {
	a := &app{stdout: stdout, stderr: stderr}
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
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	if c.Flags != nil {
		c.Flags(fs)
	}
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	if len(names) > 0 {
		sort.Strings(names)
		fmt.Fprintf(w, "\nFlags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
}

// run executes one iotq invocation and returns its exit code.
func (a *app) run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		a.printHelp(a.stderr)
		return exitUsage
	}
	name := args[0]
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
	fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	runFn := c.Flags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			a.printCommandHelp(a.stdout, c)
			return exitOK
		}
		fmt.Fprintf(a.stderr, "iotq %s: %v\nRun 'iotq help %s' for usage.\n", c.Name, err, c.Name)
		return exitUsage
	}
	if err := runFn(ctx, fs.Args()); err != nil {
		var ee *exitError
		switch {
		case errors.As(err, &ee):
			if ee.msg != "" {
				fmt.Fprintf(a.stderr, "iotq %s: %s\n", c.Name, ee.msg)
			}
			return ee.code
		case errors.Is(err, errUsage):
			fmt.Fprintf(a.stderr, "iotq %s: %s\nRun 'iotq help %s' for usage.\n", c.Name, strings.TrimPrefix(err.Error(), errUsage.Error()+": "), c.Name)
			return exitUsage
		default:
			fmt.Fprintf(a.stderr, "iotq %s: %v\n", c.Name, err)
			return exitFailure
		}
	}
	return exitOK
}

// exitError carries a specific exit code (for example the exit code of a
// command run inside an emulated link).
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return fmt.Sprintf("exit %d: %s", e.code, e.msg) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := newApp(os.Stdout, os.Stderr).run(ctx, os.Args[1:])
	stop()
	os.Exit(code)
}
