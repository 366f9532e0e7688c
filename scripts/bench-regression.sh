#!/usr/bin/env bash
# Throughput of two iotq builds side by side (no regression check): the
# Rust mqtt5 client's benchmark (mqttv5 bench, installed by setup.sh) as the
# load generator, brokers alternated, ROUNDS rounds, each broker fresh per run.
#
#   scripts/bench-regression.sh OLD_IOTQ NEW_IOTQ [ROUNDS]   > table.csv
#   LOADS="0:20" scripts/bench-regression.sh ...   # only QoS 0 to 20 subscribers
#
# Prints CSV: round,build,load,qos,subscribers,msgs_per_s (mqttv5's throughput_avg,
# delivered messages per second). Loopback only.
set -euo pipefail
old=$1 new=$2 rounds=${3:-3}
bench=$(command -v mqttv5 || echo "$HOME/.cargo/bin/mqttv5")
port=$((20000 + RANDOM % 20000))
echo "round,build,load,qos,subscribers,msgs_per_s"
for r in $(seq 1 "$rounds"); do
	for load in ${LOADS:-0:1 1:1 0:20 1:20}; do
		qos=${load%%:*} subs=${load##*:}
		for build in old new; do
			bin=$old; [ "$build" = new ] && bin=$new
			"$bin" broker --listen "mqtt://127.0.0.1:$port" --store none >/dev/null 2>&1 &
			pid=$!
			for _ in $(seq 50); do (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
			out=$(timeout 60 "$bench" bench --mode throughput --duration 6 --warmup 1 --payload-size 100 \
				--publishers 1 --subscribers "$subs" -q "$qos" -H 127.0.0.1 -p "$port" 2>&1 || true)
			kill "$pid"; wait "$pid" 2>/dev/null || true
			rate=$(printf '%s\n' "$out" | grep -oE '"throughput_avg": *[0-9.]+' | head -1 | grep -oE '[0-9.]+$' || echo "")
			echo "$r,$build,p${qos}x$subs,$qos,$subs,${rate:-NA}"
		done
	done
done
