// Package serve is the skeleton the long-running servers (broker, gateway)
// share, so that they behave alike where they are alike:
//
//   - AcceptLoop: accept connections until the serving context ends, with
//     a backoff after a failed Accept (a persistent error such as EMFILE
//     neither spins a core nor floods the log);
//   - the admin HTTP server (StartAdmin): /metrics, /healthz and, when
//     asked for, /debug/pprof/;
//   - Lifecycle: Start once, Ready, Close idempotent and safe on nil, the
//     serving context Close cancels and the goroutines Close waits for.
//   - DefaultStateDir: where a server keeps its state given none;
//   - LogOptions, ParseLevel, NewLogger: the log output of every command
//     (cmd/iotq's newLogger is their one caller).
//
// The ready file's content is a contract between servers and the lab, so
// it lives in package records (records.WriteServerReady); the servers
// write it at the end of the start function they give Lifecycle.Start.
//
// The package imports nothing of this module: what it accepts from is a
// small interface (Acceptor) that transport.Listener satisfies.
package serve
