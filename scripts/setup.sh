#!/usr/bin/env bash
# Installs everything iotq's tests and lab need on a fresh Debian 12 machine
# (run as root): Mosquitto (interop peer), tshark (pcap checks), iproute2,
# ping (the README's link example), Python paho-mqtt 2.1.0 (independent
# client), and the pinned Go modules. It never stops or reconfigures a
# service: tests start their own Mosquitto on free loopback ports, so a
# system Mosquitto on 1883 may keep running.
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

go mod download
go build -o bin/iotq ./cmd/iotq
echo "setup: done; binary at bin/iotq" >&2
