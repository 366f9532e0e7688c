package link

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/iotq/iotq/link/profile"
)

// WriteStats prints counters as an aligned table, one row per direction.
// The "drop nat" column (Step.Rebind) appears only when a row has such
// drops, so tables of runs without a rebinding NAT stay as they were.
func WriteStats(w io.Writer, stats []LinkStats) error {
	nat := false
	for _, s := range stats {
		nat = nat || s.DropNAT > 0
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "link\tdirection\tpackets\tbytes\tdrop random\tdrop queue\tdrop retries\tdrop down\t")
	if nat {
		fmt.Fprint(tw, "drop nat\t")
	}
	fmt.Fprintln(tw, "queue p50\tqueue p99\tqueue max\t")
	for _, s := range stats {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t", s.Link, s.Direction(), s.Packets, s.Bytes,
			s.DropRandom, s.DropQueue, s.DropRetries, s.DropDown)
		if nat {
			fmt.Fprintf(tw, "%d\t", s.DropNAT)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t\n", fmtDur(s.QueueDelay.P50), fmtDur(s.QueueDelay.P99), fmtDur(s.QueueDelay.Max))
	}
	return tw.Flush()
}

func fmtDur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.Round(10 * time.Microsecond).String()
}

// ParseBytes parses a size in bytes ("125000", "64kb", "1mb"); see
// profile.ParseBytes.
func ParseBytes(s string) (int, error) { return profile.ParseBytes(s) }
