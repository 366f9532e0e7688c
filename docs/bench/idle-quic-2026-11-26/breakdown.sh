#!/bin/sh
# Per-connection breakdown of the broker's memory from the memstats-*.txt
# files in this directory (10 000 idle QUIC connections; absolute values
# over 10 000, so they include the broker's own few MiB).
cd "$(dirname "$0")"
for f in memstats-before.txt memstats-after.txt memstats-after-adaptivestackstart0.txt; do
  awk -v f="$f" '
    { v[$1] = $2 }
    END {
      n = 10000; k = 1024
      printf "%s: goroutines %.1f per connection; KiB per connection: live heap %.1f, heap in use %.1f (unused slots in spans %.1f), goroutine stacks %.1f, RSS %.1f\n", f,
        v["go_goroutines"] / n, v["go_memstats_heap_alloc_bytes"] / n / k, v["go_memstats_heap_inuse_bytes"] / n / k,
        (v["go_memstats_heap_inuse_bytes"] - v["go_memstats_heap_alloc_bytes"]) / n / k, v["go_memstats_stack_inuse_bytes"] / n / k,
        v["process_resident_memory_bytes"] / n / k
    }' "$f"
done
