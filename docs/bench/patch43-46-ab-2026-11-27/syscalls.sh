#!/bin/bash
# System calls per delivered message, broker side, for one mqttv5 throughput
# run against a fresh broker: the deltas of syscr/syscw/rchar/wchar in
# /proc/PID/io over the run, divided by mqttv5's received count.
# usage: syscalls.sh NAME mosquitto|IOTQ_BINARY SUBSCRIBERS QOS
# (mqttv5 0.29.9 as in bench-throughput.sh; loopback only.)
set -eu
name=$1 bin=$2 subs=$3 qos=$4
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
d=$(mktemp -d) bp=""
trap '[ -z "$bp" ] || { kill "$bp" 2> /dev/null; wait "$bp" 2> /dev/null; }; rm -rf "$d"' EXIT
if [ "$bin" = mosquitto ]; then
  printf 'listener %s 127.0.0.1\nallow_anonymous true\npersistence false\nmax_queued_messages 1000000\n' "$port" > "$d/m.conf"
  mosquitto -c "$d/m.conf" > "$d/b.log" 2>&1 &
else
  "$bin" broker --listen "mqtt://127.0.0.1:$port" --state-dir "$d/state" --store none --log-level warn > "$d/b.log" 2>&1 &
fi
bp=$!
for _ in $(seq 50); do (exec 3<> "/dev/tcp/127.0.0.1/$port") 2> /dev/null && break; sleep 0.1; done
io() { awk '/^(rchar|wchar|syscr|syscw):/ {printf "%s ", $2}' "/proc/$bp/io"; }
cpu() { awk '{print $14 + $15}' "/proc/$bp/stat"; }
b0=$(io) c0=$(cpu)
mqttv5 bench --mode throughput --duration 6 --warmup 1 --payload-size 100 -q "$qos" \
  --url "mqtt://127.0.0.1:$port" --publishers 1 --subscribers "$subs" > "$d/out.json" 2> /dev/null
b1=$(io) c1=$(cpu)
python3 - "$name" "$subs" "$qos" "$d/out.json" "$b0" "$b1" "$c0" "$c1" "$(getconf CLK_TCK)" << 'PY'
import json, sys
name, subs, qos, f, b0, b1, c0, c1, tck = sys.argv[1:]
r = json.load(open(f))["results"]
rc, wc, sr, sw = (int(b) - int(a) for a, b in zip(b0.split(), b1.split()))
n = r["received"]
print(f"{name},{subs},{qos},{r['throughput_avg']:.0f},{n},{sr / n:.3f},{sw / n:.3f},{rc / max(sr, 1):.0f},{wc / max(sw, 1):.0f},{(int(c1) - int(c0)) / int(tck):.2f}")
PY
