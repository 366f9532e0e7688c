#!/usr/bin/env bash
# Installs everything iotq's tests and lab need on a fresh Debian 12 machine
# (run as root): Mosquitto (interop peer), tshark (pcap checks), iproute2,
# ping (the README's link example), Python paho-mqtt 2.1.0 (independent
# client), the AMQP 1.0 peers (an embedded ActiveMQ Artemis 2.55.0 from Maven
# Central, compiled into the cache directory; Python qpid-proton from apt),
# nats-server and golangci-lint (go install, pinned) and the pinned Go
# modules. It never stops or reconfigures a service: tests start their own
# Mosquitto on free loopback ports, so a system Mosquitto on 1883 may keep
# running.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v mosquitto >/dev/null || need_apt+=(mosquitto)
command -v mosquitto_pub >/dev/null || need_apt+=(mosquitto-clients)
command -v tshark >/dev/null || need_apt+=(tshark)
command -v ip >/dev/null || need_apt+=(iproute2)
# iputils-ping pinned to Debian 12's version (falls back to the current one
# below if the mirror no longer carries it).
command -v ping >/dev/null || need_apt+=(iputils-ping=3:20221126-1+deb12u1)
# AMQP 1.0: Java 17 and Maven build the embedded Artemis; qpid-proton is the
# independent Python AMQP client of the interop tests.
command -v javac >/dev/null || need_apt+=(openjdk-17-jdk-headless)
command -v mvn >/dev/null || need_apt+=(maven)
command -v openssl >/dev/null || need_apt+=(openssl)
# scripts/bench-throughput.sh reads the iotq broker's /metrics with it.
command -v curl >/dev/null || need_apt+=(curl)
# (Debian's module is for Debian's /usr/bin/python3, which the tests use for it.)
/usr/bin/python3 -c 'import proton' 2>/dev/null || need_apt+=(python3-qpid-proton=0.37.0-2+b1)
# libcoap: CoAP interop peer (coap-client-notls/-openssl, coap-server-openssl).
command -v coap-client-notls >/dev/null || need_apt+=(libcoap3-bin=4.3.1-1)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "setup: installing ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  if ! apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null; then
    echo "setup: pinned versions unavailable; installing the mirror's current ones" >&2
    apt-get install -y -qq --no-install-recommends "${need_apt[@]%%=*}" >/dev/null
  fi
fi

# Python paho-mqtt 2.x is an independent MQTT peer in the interop tests.
if ! python3 -c 'import paho.mqtt, sys; sys.exit(0 if paho.mqtt.__version__.startswith("2.") else 1)' 2>/dev/null; then
  echo "setup: installing paho-mqtt==2.1.0 from PyPI" >&2
  python3 -m pip install -q paho-mqtt==2.1.0 || python3 -m pip install -q --break-system-packages paho-mqtt==2.1.0
fi

# Embedded ActiveMQ Artemis (AMQP 1.0 broker of the tests and the lab):
# scripts/artemis/pom.xml pins the jars, Broker.java is our launcher. Both go
# to $IOTQ_CACHE/artemis-2.55.0 (lib/ and classes/); tests find it there.
artemis_dir="${IOTQ_CACHE:-$HOME/.cache/iotq}/artemis-2.55.0"
if [ ! -f "$artemis_dir/classes/Broker.class" ] || [ scripts/artemis/Broker.java -nt "$artemis_dir/classes/Broker.class" ] || [ scripts/artemis/pom.xml -nt "$artemis_dir/classes/Broker.class" ]; then
  echo "setup: fetching ActiveMQ Artemis 2.55.0 into $artemis_dir" >&2
  mkdir -p "$artemis_dir/classes"
  mvn -q -B -Dstyle.color=never -f scripts/artemis/pom.xml dependency:copy-dependencies -DoutputDirectory="$artemis_dir/lib" >&2
  javac -nowarn -cp "$artemis_dir/lib/*" -d "$artemis_dir/classes" scripts/artemis/Broker.java
fi

# mqttv5-cli, the Rust mqtt5 crate's client: the multi-stream MQTT over QUIC
# peer of the interop tests (docs/mqtt-quic.md). Pinned and built with its
# lock file (0.29.10's lock names a crate version the registry mirror lacks);
# compiling takes several minutes.
mqttv5_version=0.29.9
mqttv5_bin="$(command -v mqttv5 || echo "$HOME/.cargo/bin/mqttv5")"
if ! "$mqttv5_bin" --version 2>/dev/null | grep -q " $mqttv5_version\$"; then
  echo "setup: building mqttv5-cli $mqttv5_version with cargo (several minutes)" >&2
  cargo_bin="$(command -v cargo || echo "$HOME/.cargo/bin/cargo")"
  nice -n 10 "$cargo_bin" install mqttv5-cli --version "$mqttv5_version" --locked --quiet
fi

# nats-server: the three-node cluster (JetStream, MQTT) of the gateway's
# failover test (internal/testutil.StartNATSCluster, docs/deploy.md).
nats_version=v2.15.2
nats_bin="$(go env GOPATH | cut -d: -f1)/bin/nats-server"
if [ "$("$nats_bin" --version 2>/dev/null)" != "nats-server: $nats_version" ]; then
  echo "setup: building nats-server $nats_version with go install" >&2
  GOBIN="$(dirname "$nats_bin")" go install "github.com/nats-io/nats-server/v2@$nats_version"
fi

# golangci-lint: CI's lint step (.ci/run, config in .golangci.yml). Built
# from source at the pinned version, about two minutes.
golangci_version=2.15.0
golangci_bin="$(go env GOPATH | cut -d: -f1)/bin/golangci-lint"
if ! "$golangci_bin" version 2>/dev/null | grep -q "version $golangci_version "; then
  echo "setup: building golangci-lint v$golangci_version with go install" >&2
  GOFLAGS= GOBIN="$(dirname "$golangci_bin")" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v$golangci_version"
fi

go mod download
# -buildvcs=auto on the command line wins over a GOFLAGS of -buildvcs=false
# (set on some machines): the binary, and every lab manifest it writes,
# then names the commit it was built from (issue 18: manifests said
# "unknown"). Outside a git checkout auto stamps nothing and still builds.
go build -buildvcs=auto -o bin/iotq ./cmd/iotq
echo "setup: done; binary at bin/iotq" >&2
