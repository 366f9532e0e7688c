#!/usr/bin/env bash
# Short fuzzing run of every Go fuzz target in the repository (CI): each
# FuzzXxx of every package that has one runs for FUZZTIME (default 10s),
# one target at a time. Fails if any target finds a crasher (Go then writes
# it to <package>/testdata/fuzz/FuzzXxx/; fix the code and commit it as a
# seed) or does not build.
#
#   scripts/fuzz-short.sh                      # every target, 10s each
#   FUZZTIME=60s scripts/fuzz-short.sh         # longer
#   scripts/fuzz-short.sh ./client/amqp ./gateway   # only these packages
#
# FUZZPARALLEL sets the fuzzing workers per target (go test -parallel;
# default 1: CI hosts are small and shared).
set -euo pipefail
cd "$(dirname "$0")/.."

fuzztime=${FUZZTIME:-10s}
parallel=${FUZZPARALLEL:-1}

if [ $# -gt 0 ]; then
	pkgs=("$@")
else
	mapfile -t pkgs < <(grep -rl --include='*_test.go' '^func Fuzz' . | xargs -r -n1 dirname | sort -u)
fi
if [ ${#pkgs[@]} -eq 0 ]; then
	echo "fuzz-short: no fuzz targets found" >&2
	exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
failed=()
summary=()
for pkg in "${pkgs[@]}"; do
	case $pkg in ./*) ;; *) pkg=./$pkg ;; esac
	# go test runs in the package's directory: a nested module works too.
	if ! targets=$(cd "$pkg" && go test -list '^Fuzz' . 2>"$log"); then
		cat "$log" >&2
		failed+=("$pkg (go test -list failed: does not build?)")
		continue
	fi
	for target in $(grep '^Fuzz' <<<"$targets" || true); do
		echo "=== fuzz $pkg $target ($fuzztime)"
		ok=0
		for attempt in 1 2; do
			if (cd "$pkg" && go test . -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -parallel "$parallel") >"$log" 2>&1; then
				ok=1
				break
			fi
			# Go's fuzzer sometimes reports the end of -fuzztime itself as a
			# failure ("context deadline exceeded", no failing input written):
			# that is no crasher, so run the target once more. A real crasher
			# says "Failing input written to" and fails at once.
			if grep -q 'Failing input written to' "$log" || ! grep -q 'context deadline exceeded' "$log"; then
				break
			fi
			echo "    (the fuzzer's deadline was reported as a failure, no input written: once more)"
		done
		if [ $ok = 1 ]; then
			# A run whose -fuzztime went on the baseline coverage of a large
			# corpus (a loaded host) prints no "execs:" line: still a pass.
			execs=$(grep -o 'execs: [0-9]*' "$log" | tail -n1 | cut -d' ' -f2 || true)
			summary+=("ok    $pkg $target ${execs:-?} execs")
		else
			cat "$log"
			summary+=("FAIL  $pkg $target")
			failed+=("$pkg $target")
		fi
	done
done

printf '%s\n' "${summary[@]}"
if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz-short: ${#failed[@]} failed:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
