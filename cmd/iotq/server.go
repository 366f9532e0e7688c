package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"syscall"

	"github.com/iotq/iotq/broker"
	"github.com/iotq/iotq/internal/serve"
)

// serverFlags are the flags every long-running server command (broker,
// gateway) has beside its configuration keys.
type serverFlags struct {
	config      *string
	printConfig *bool
	check       *bool
}

// addServerFlags registers --config, --print-config and --check on fs.
func addServerFlags(fs *flag.FlagSet) serverFlags {
	return serverFlags{
		config:      fs.String("config", "", "YAML configuration `file`"),
		printConfig: fs.Bool("print-config", false, "print the effective configuration as YAML and exit"),
		check:       fs.Bool("check", false, "validate the configuration (and files it names) and exit"),
	}
}

// service is a long-running server as runServer drives it.
type service interface {
	Start(ctx context.Context) error
	Close() error
}

// serverOptions is what runServer needs of a server's Options.
type serverOptions[O any] interface {
	Validate() error
	WithDefaults() O
}

// serverSpec wires one server package into runServer.
type serverSpec[O serverOptions[O]] struct {
	load    func(path string) (O, error) // the package's LoadConfig
	marshal func(O) ([]byte, error)      // the package's MarshalConfig
	// flags applies the flags given on the command line over the file's
	// values; an error is a usage error.
	flags func(*O) error
	log   func(O) serve.LogOptions
	// build sets the logger and returns the server, not started.
	build func(O, *slog.Logger) (service, error)
	// listenFlag names the flag of the server's listen addresses
	// (--listen, --route), for the hint when one is taken.
	listenFlag string
}

// runServer is the flow of a long-running server command: the --config
// file, flags over it, validation (a usage error), --print-config, the
// logger, the server, --check, then Start and serve until ctx ends (SIGINT
// or SIGTERM, see main) and Close. The server itself writes its ready file
// (the ready_file option) once it accepts.
func runServer[O serverOptions[O]](ctx context.Context, a *app, f serverFlags, s serverSpec[O]) error {
	var opts O
	if *f.config != "" {
		o, err := s.load(*f.config)
		if err != nil {
			return &exitError{code: exitFailure, msg: "bad configuration:\n" + err.Error()}
		}
		opts = o
	}
	if err := s.flags(&opts); err != nil {
		return usageErrorf("%v", err)
	}
	if err := opts.Validate(); err != nil {
		return usageErrorf("%s", strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	if *f.printConfig {
		b, err := s.marshal(opts.WithDefaults())
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(b)
		return err
	}
	log, level, err := newLogger(a.stderr, s.log(opts))
	if err != nil {
		return usageErrorf("%v", err)
	}
	srv, err := s.build(opts, log)
	if err != nil {
		return err
	}
	if *f.check {
		_ = srv.Close()
		fmt.Fprintln(a.stdout, "configuration OK")
		return nil
	}
	if err := srv.Start(ctx); err != nil {
		// a server that never served has nothing to say on closing ("gateway
		// stopped"): the error line is the one line the user sees
		level.Set(max(level.Level(), slog.LevelWarn))
		_ = srv.Close()
		return addressInUse(err, s.listenFlag)
	}
	<-ctx.Done()
	log.Info("signal received: shutting down")
	return srv.Close()
}

// addressInUse turns an error of Start whose cause is a taken address into
// one line that names the address, how to find its holder and the flag to
// change (the metrics address: --metrics; any other: listenFlag). Other
// errors, and those that already say so (broker.ErrAddressInUse), pass
// unchanged.
func addressInUse(err error, listenFlag string) error {
	if !errors.Is(err, syscall.EADDRINUSE) || errors.Is(err, broker.ErrAddressInUse) {
		return err
	}
	addr, network := "", "tcp"
	var op *net.OpError
	if errors.As(err, &op) && op.Addr != nil {
		addr, network = op.Addr.String(), op.Addr.Network()
	}
	flagName := listenFlag
	if strings.Contains(err.Error(), "metrics") {
		flagName = "--metrics"
	}
	ss := "ss -ltnp"
	if strings.HasPrefix(network, "udp") {
		ss = "ss -lunp"
	}
	port := addr
	if _, p, perr := net.SplitHostPort(addr); perr == nil {
		port = ":" + p
	}
	if addr == "" {
		return &exitError{code: exitFailure, msg: fmt.Sprintf("listen address already in use; choose another port with %s", flagName)}
	}
	return &exitError{code: exitFailure, msg: fmt.Sprintf("listen address already in use: %s (%s) is taken by another process (find it with: %s | grep %s); choose another port with %s",
		addr, strings.ToUpper(network), ss, port, flagName)}
}
