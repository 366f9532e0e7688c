#!/usr/bin/env bash
# Usage: scripts/run-campaigns.sh "LAB-RUN-ARGS" ["LAB-RUN-ARGS" ...]
#
# Runs lab campaigns one after the other (never two at once: they would
# time each other), each as "iotq lab run LAB-RUN-ARGS", which must name
# its results directory with --out DIR. Meant for long campaigns left in
# the background:
#   nohup scripts/run-campaigns.sh "e2 --out results/e2-full --jobs 64" \
#     "e4 --out results/e4-full --jobs 64" > /dev/null 2>&1 &
#
# A watchdog restarts a stuck campaign: when nothing under its --out
# directory changed for STALL_SECONDS (running cells write captures and
# records as they go; a cell longer than that without any write is not
# expected), it writes the lab process's thread states (and their stacks,
# when gdb is installed) to DIR/stall-TIME.txt, sends SIGQUIT (the Go
# runtime prints every goroutine's stack into the log), removes the
# namespaces that process made (iotq-PID-*) with the processes in them,
# and runs the campaign again with --resume: finished cells are kept.
# At most MAX_ATTEMPTS runs per campaign.
#
# Environment:
#   IOTQ            the iotq binary (default: bin/iotq)
#   LOG             where each campaign's output and this script's lines go
#                   (default: campaigns.log)
#   STALL_SECONDS   default 900
#   POLL_SECONDS    how often the watchdog looks (default 30)
#   MAX_ATTEMPTS    default 3
#
# Exit status: 0 when every campaign's last run exited 0, 1 otherwise,
# 2 for a usage mistake.
set -uo pipefail

if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
	sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
fi
if [ $# -eq 0 ]; then
	echo "run-campaigns.sh: no campaign given; see --help" >&2
	exit 2
fi

IOTQ=${IOTQ:-bin/iotq}
LOG=${LOG:-campaigns.log}
STALL_SECONDS=${STALL_SECONDS:-900}
POLL_SECONDS=${POLL_SECONDS:-30}
MAX_ATTEMPTS=${MAX_ATTEMPTS:-3}
for v in STALL_SECONDS POLL_SECONDS MAX_ATTEMPTS; do
	if ! [[ ${!v} =~ ^[1-9][0-9]*$ ]]; then
		echo "run-campaigns.sh: $v=${!v}: want a whole number above 0" >&2
		exit 2
	fi
done
for spec in "$@"; do
	if ! [[ " $spec " =~ \ --out\ ([^ ]+)\  ]]; then
		echo "run-campaigns.sh: \"$spec\": name the results directory with --out DIR (the watchdog watches it, a restart resumes it)" >&2
		exit 2
	fi
done
if ! [ -x "$IOTQ" ]; then
	echo "run-campaigns.sh: $IOTQ is not an executable; build it (go build -o bin/iotq ./cmd/iotq) or set IOTQ" >&2
	exit 2
fi

say() { echo "== $(date -u +%FT%TZ) $*" >> "$LOG"; }

# stalled DIR: nothing under DIR changed for STALL_SECONDS.
stalled() {
	local since=$(( $(date +%s) - STALL_SECONDS ))
	[ -d "$1" ] && [ -z "$(find "$1" -newermt "@$since" -print -quit 2>/dev/null)" ]
}

# cleanup PID: the namespaces a killed lab process left, and what runs in them.
cleanup() {
	local ns
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^iotq-$1-"); do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
}

status=0
for spec in "$@"; do
	[[ " $spec " =~ \ --out\ ([^ ]+)\  ]]
	out=${BASH_REMATCH[1]}
	for attempt in $(seq 1 "$MAX_ATTEMPTS"); do
		args=$spec
		if [ "$attempt" -gt 1 ] && ! [[ " $args " == *" --resume "* ]]; then
			args="$args --resume"
		fi
		say "$IOTQ lab run $args (attempt $attempt)"
		# shellcheck disable=SC2086 # the spec is a command line, split on purpose
		"$IOTQ" lab run $args >> "$LOG" 2>&1 &
		pid=$!
		stuck=0
		while kill -0 "$pid" 2>/dev/null; do
			sleep "$POLL_SECONDS"
			if kill -0 "$pid" 2>/dev/null && stalled "$out"; then
				stuck=1
				diag="$out/stall-$(date -u +%Y%m%dT%H%M%SZ).txt"
				{
					echo "# nothing under $out changed for $STALL_SECONDS s; lab process $pid"
					uptime
					ps -L -o tid,cls,rtprio,stat,pcpu,time,wchan:32,comm -p "$pid"
					if command -v gdb > /dev/null; then
						timeout 120 gdb -p "$pid" -batch -ex "thread apply all bt 16" 2>&1 | tail -n 600
					fi
				} > "$diag" 2>&1
				say "$out: stalled for $STALL_SECONDS s; thread states in $diag; SIGQUIT (goroutine stacks follow in this log)"
				kill -QUIT "$pid" 2>/dev/null
				for _ in 1 2 3 4 5 6 7 8 9 10; do
					kill -0 "$pid" 2>/dev/null || break
					sleep 1
				done
				kill -KILL "$pid" 2>/dev/null
				break
			fi
		done
		wait "$pid"
		rc=$?
		say "$out: exit $rc"
		if [ "$stuck" = 0 ]; then
			break
		fi
		cleanup "$pid"
	done
	if [ "$rc" != 0 ]; then
		status=1
	fi
done
say "all done"
exit $status
