// Package protonbroker builds the command line of a small AMQP 1.0 broker
// on Apache Qpid Proton (broker.py, embedded here, run by the Python of
// python3-qpid-proton): iotq's second real AMQP broker for tests, on
// another stack than ActiveMQ Artemis (internal/artemis). Proton-C's
// engine enforces the protocol strictly (session windows, link credit),
// where Artemis is lenient.
//
// The broker listens on the address it is given (port 0: a free port the
// kernel picks, reported on the "ready PORT [TLS-PORT]" line it prints),
// creates addresses on first use, fans a message out to every receiver
// link of its address (or keeps it for the first one), grants link credit
// to senders, accepts or (for a configured prefix) rejects unsettled
// transfers, and speaks SASL ANONYMOUS and PLAIN or no SASL at all. It
// persists nothing, stops on SIGTERM/SIGINT and, with StopOnEOF, when its
// standard input closes. internal/testutil.StartProton starts it for a test
// and stops it by its PID.
//
// protonbroker imports nothing of iotq.
package protonbroker
