package link

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteStats prints counters as an aligned table, one row per direction.
func WriteStats(w io.Writer, stats []LinkStats) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "link\tdirection\tpackets\tbytes\tdrop random\tdrop queue\tdrop retries\tdrop down\tqueue p50\tqueue p99\tqueue max\t")
	for _, s := range stats {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t\n", s.Link, s.Direction(), s.Packets, s.Bytes,
			s.DropRandom, s.DropQueue, s.DropRetries, s.DropDown,
			fmtDur(s.QueueDelay.P50), fmtDur(s.QueueDelay.P99), fmtDur(s.QueueDelay.Max))
	}
	return tw.Flush()
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.Round(10 * time.Microsecond).String()
}

// ParseBytes parses a size in bytes: "125000", "64k" or "64kb" (KiB),
// "1m"/"1mb" (MiB).
func ParseBytes(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, u := range []struct {
		suf string
		m   int
	}{{"kb", 1 << 10}, {"k", 1 << 10}, {"mb", 1 << 20}, {"m", 1 << 20}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSuffix(t, u.suf), u.m
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || math.IsNaN(v) || v < 0 || v*float64(mult) > 1<<40 {
		return 0, fmt.Errorf("size %q is not understood: give bytes such as 125000, 64kb or 1mb", s)
	}
	return int(v * float64(mult)), nil
}
