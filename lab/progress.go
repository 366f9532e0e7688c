package lab

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// progress draws a progress bar with an ETA. On a terminal it redraws one
// line; otherwise it prints one line per cell. The ETA scales the estimate
// of the cells left by the wall time per estimated second so far (before
// the first cell ends: by the cells at once asked for, jobs). Not safe
// for concurrent use: only Run's own goroutine calls it, cells report
// their end to that goroutine over a channel.
type progress struct {
	w       io.Writer
	tty     bool
	total   int
	done    int
	failed  int
	estLeft time.Duration // estimate of the cells not yet finished
	estDone time.Duration // estimate of the cells finished in this run
	started time.Time
	now     func() time.Time
	jobs    int // cells at once asked for: divides the remaining estimate until the first cell ends
}

func newProgress(w io.Writer, cells []Cell, now func() time.Time) *progress {
	if w == nil {
		return nil
	}
	p := &progress{w: w, total: len(cells), now: now, started: now()}
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	for _, c := range cells {
		p.estLeft += estimate(c)
	}
	return p
}

// skip accounts for a cell that was already complete.
func (p *progress) skip(c Cell) {
	if p == nil {
		return
	}
	p.done++
	p.estLeft -= estimate(c)
}

// start shows the cell about to run.
func (p *progress) start(c Cell) {
	if p == nil {
		return
	}
	line := fmt.Sprintf("%s %d/%d %s  ETA %s", p.bar(), p.done, p.total, c.ID, p.eta())
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s", line)
	}
}

// finish records a finished cell and its wall time.
func (p *progress) finish(c Cell, took time.Duration, err error) {
	if p == nil {
		return
	}
	p.done++
	p.estLeft -= estimate(c)
	p.estDone += estimate(c)
	status := "ok"
	if err != nil {
		p.failed++
		status = "FAILED: " + shorten(firstLine(err.Error()), 100)
	}
	line := fmt.Sprintf("%s %d/%d %s %s (%s)  ETA %s", p.bar(), p.done, p.total, c.ID, status, took.Round(100*time.Millisecond), p.eta())
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K%s\n", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// end finishes the bar.
func (p *progress) end(interrupted bool) {
	if p == nil {
		return
	}
	msg := fmt.Sprintf("%d/%d cells, %d failed, %s", p.done, p.total, p.failed, p.now().Sub(p.started).Round(time.Second))
	if interrupted {
		msg += " (interrupted: run again with --resume to complete)"
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\033[K")
	}
	fmt.Fprintln(p.w, msg)
}

func (p *progress) bar() string {
	const width = 24
	n := 0
	if p.total > 0 {
		n = p.done * width / p.total
	}
	return "[" + strings.Repeat("=", n) + strings.Repeat(" ", width-n) + "]"
}

// eta scales the remaining estimate by how the estimates compared with
// reality so far.
func (p *progress) eta() string {
	var left time.Duration
	if p.estDone > 0 {
		// The wall time this run took per estimated second of the cells
		// it finished holds the concurrency the timing guard allowed,
		// which the requested --jobs does not (E6 asked for 64 at once,
		// ran one, and showed an ETA of 2 minutes for 2 hours of cells).
		left = time.Duration(float64(p.estLeft) * float64(p.now().Sub(p.started)) / float64(p.estDone))
	} else {
		left = p.estLeft / time.Duration(max(p.jobs, 1))
	}
	if left < 0 {
		left = 0
	}
	return left.Round(time.Second).String()
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-3]) + "..."
}
