// Package artemis finds and builds the command line of the embedded
// ActiveMQ Artemis (AMQP 1.0 broker) that scripts/setup.sh installs: the
// jars of scripts/artemis/pom.xml in DIR/lib and our launcher
// (scripts/artemis/Broker.java) compiled into DIR/classes, with DIR =
// $IOTQ_CACHE/artemis-2.55.0 (default ~/.cache/iotq/artemis-2.55.0).
//
// Tests start it through internal/testutil.StartArtemis; the lab (E8) can
// run the same command inside a node's namespace. The launcher binds only
// the address it is given, persists nothing, prints "ready" when its
// acceptors listen and stops on SIGTERM/SIGINT (and, with StopOnEOF, when
// its standard input closes).
//
// artemis imports nothing of iotq.
package artemis
