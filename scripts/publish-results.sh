#!/usr/bin/env bash
# Copies the publishable part of a campaign's results into the repository's
# evidence folder: the report (report.md with its figures as SVG), tables.csv,
# summary.json and manifest.json; never raw records or pcaps.
#
#   scripts/publish-results.sh RESULTS_DIR NAME "COMMAND THAT PRODUCED IT"
#
# RESULTS_DIR is a directory written by "iotq lab run" and reported by
# "iotq report" (RESULTS_DIR/report/). The copy lands in evidence/NAME/.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 RESULTS_DIR NAME \"COMMAND\"" >&2
  exit 2
fi
src=$1 name=$2 cmd=$3
cd "$(dirname "$0")/.."
rep=$src/report
[ -f "$rep/report.md" ] || { echo "$0: $rep/report.md not found: run 'iotq report $src' first" >&2; exit 1; }
[ -f "$src/manifest.json" ] || { echo "$0: $src/manifest.json not found: is $src a results directory?" >&2; exit 1; }
# A campaign whose timing guard failed is not evidence (docs/lab.md, "The timing guard").
status=$(python3 -c 'import json,sys; print((json.load(open(sys.argv[1])).get("emulator_timing") or {}).get("status",""))' "$src/manifest.json")
case $status in
  fail|refused) echo "$0: $src: the timing guard failed (manifest emulator_timing.status=$status): not published; re-run it on an idle host" >&2; exit 1 ;;
esac
dst=evidence/$name
rm -rf "$dst"
mkdir -p "$dst/figures"
cp "$rep/tables.csv" "$rep/summary.json" "$dst/"
cp "$src/manifest.json" "$dst/"
cp "$rep"/figures/*.svg "$dst/figures/"
# PNGs are not published: drop their links, keep the SVG ones.
sed -E 's# \(\[PNG\]\(figures/[^)]*\.png\)\)##g' "$rep/report.md" > "$dst/report.md"
printf '%s\n' "$cmd" > "$dst/COMMAND"
# The index's generated section (campaigns, hosts, headline comparisons with
# CIs) follows the data; TestEvidenceIndexIsUpToDate fails until it does.
iotq=${IOTQ:-bin/iotq}
if [ -x "$iotq" ]; then
  "$iotq" report --evidence-index evidence >&2
else
  echo "$0: $iotq not found: run 'iotq report --evidence-index evidence' to update evidence/README.md" >&2
fi
echo "published $src into $dst ($(du -sh "$dst" | cut -f1))" >&2
