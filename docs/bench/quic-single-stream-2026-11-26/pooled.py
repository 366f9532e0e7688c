#!/usr/bin/env python3
"""Pools run-1 and run-2 (3 rounds each): per load, the medians of iotq-quic-none (main) and
base-quic-none (67c16df) over the 6 rounds, and the within-round ratios (median, range).
Run from this directory: python3 pooled.py > pooled.txt"""
import csv
import statistics as st

rows = []
for run in ("run-1", "run-2"):
    for r in csv.DictReader(open(f"{run}/runs.csv")):
        r["run"] = run
        rows.append(r)
print("| load | main (median of 6 rounds) | 67c16df | ratio of medians | within-round ratio: median | min-max |")
print("|---|---|---|---|---|---|")
for load in ("p2p-q0", "p2p-q1", "fan20-q0", "fan20-q1"):
    ratios, new, old = [], [], []
    for run in ("run-1", "run-2"):
        for rnd in ("1", "2", "3"):
            def rate(broker):
                return float(next(r["msgs_per_s"] for r in rows if r["run"] == run and r["round"] == rnd and r["load"] == load and r["broker"] == broker))
            a, b = rate("iotq-quic-none"), rate("base-quic-none")
            new.append(a)
            old.append(b)
            ratios.append(a / b)
    print(f"| {load} | {st.median(new) / 1e3:.0f}k | {st.median(old) / 1e3:.0f}k | {st.median(new) / st.median(old):.2f}x | {st.median(ratios):.2f}x | {min(ratios):.2f}-{max(ratios):.2f}x |")
