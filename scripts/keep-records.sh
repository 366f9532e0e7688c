#!/usr/bin/env bash
# Keeps a campaign's records in the repository until it can be pooled or
# merged with campaigns a later session runs, and brings them back.
#
#   scripts/keep-records.sh keep RESULTS_DIR     # -> campaign-records/NAME.tar.xz
#   scripts/keep-records.sh restore NAME [DIR]   # -> DIR (default results/NAME)
#   scripts/keep-records.sh list
#
# CAMPAIGN_RECORDS names another folder to keep them in (default: the
# repository's campaign-records/).
#
# Why: a study's repetitions (E4 and E6 at 50, E2 at 5) take more hours
# than one session has, and a session's machine keeps nothing that is not
# committed. A campaign of some repetitions with its own seed finishes in
# a session; its records wait here until "iotq lab pool" joins them with
# the others (or "iotq lab merge" joins the shards of one campaign).
#
# What is kept is what pool, merge and report read: campaign.json,
# scenario.yaml, manifest.json and, per cell, the record files and
# done.json. Never kept: broker-state/ (its TLS keys are private keys made
# at run time), pcaps (a restored campaign's radio energy falls back to
# the links.csv totals, and the report says so), logs and the processes'
# per-repetition raw files (their rows are in the record files already).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
store=${CAMPAIGN_RECORDS:-$repo/campaign-records}

usage() {
	sed -n '2,/^$/p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

case ${1:-} in
keep)
	[ $# -eq 2 ] || usage
	src=${2%/}
	[ -d "$src" ] || { echo "$0: $src is not a directory" >&2; exit 1; }
	src=$(cd "$src" && pwd)
	for f in campaign.json scenario.yaml manifest.json; do
		[ -f "$src/$f" ] || { echo "$0: $src/$f not found: is $src a results directory written by iotq lab run?" >&2; exit 1; }
	done
	name=$(basename "$src")
	mkdir -p "$store"
	list=$(mktemp)
	trap 'rm -f "$list"' EXIT
	(
		cd "$src"
		printf '%s\n' campaign.json scenario.yaml manifest.json
		# Finished cells only: an unfinished one runs again on --resume.
		for done in cells/*/done.json; do
			[ -f "$done" ] || continue
			cell=${done%/done.json}
			for f in messages.csv connections.csv links.csv cpu.csv completions.csv done.json; do
				if [ -f "$cell/$f" ]; then printf "%s\n" "$cell/$f"; fi
			done
		done
	) > "$list"
	cells=$(grep -c '/done.json$' "$list" || true)
	tar -C "$src" -cJf "$store/$name.tar.xz.tmp" -T "$list"
	mv "$store/$name.tar.xz.tmp" "$store/$name.tar.xz"
	echo "kept $src ($cells finished cells) in $store/$name.tar.xz ($(du -h "$store/$name.tar.xz" | cut -f1)); commit it, and restore it with: $0 restore $name" >&2
	;;
restore)
	[ $# -ge 2 ] && [ $# -le 3 ] || usage
	name=$2 dst=${3:-$repo/results/$2}
	[ -f "$store/$name.tar.xz" ] || { echo "$0: $store/$name.tar.xz not found; kept campaigns: $(ls "$store" 2>/dev/null | sed -n 's/\.tar\.xz$//p' | tr '\n' ' ')" >&2; exit 1; }
	if [ -d "$dst" ] && [ -n "$(ls -A "$dst")" ]; then
		echo "$0: $dst is not empty: restore into a new directory (third argument)" >&2
		exit 1
	fi
	mkdir -p "$dst"
	tar -C "$dst" -xJf "$store/$name.tar.xz"
	echo "restored $store/$name.tar.xz into $dst" >&2
	;;
list)
	ls -l "$store" 2>/dev/null | awk 'NR > 1 && /\.tar\.xz$/ {print $5, $9}'
	;;
*)
	usage
	;;
esac
