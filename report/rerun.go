package report

import (
	"bytes"
	"fmt"
)

// blindProbe reports whether the campaign's only evidence of an idle host
// is the probe that read the timer's own time (issue 18): no idle
// calibration, no send lateness, no admission steps.
func (c *campaign) blindProbe() bool {
	t := c.man.EmulatorTiming
	return t != nil && t.HostP99 > 0 && t.IdleP99 == 0 && t.Send == nil && len(t.Admission) == 0
}

// restrictedComparisons are the campaign's comparisons computed on the
// cells named in ids only (an xi pair needs both of its cells there).
func (c *campaign) restrictedComparisons(ids map[string]bool) []*Comparison {
	var cells []*CellResult
	for _, r := range c.cells {
		if ids[r.Cell] {
			cells = append(cells, r)
		}
	}
	var xi []*XiResult
	for _, x := range c.xi {
		if ids[x.TCPCell] && ids[x.QUICCell] {
			xi = append(xi, x)
		}
	}
	var batch []*BatchResult
	for _, b := range c.batch {
		if ids[b.Cell] {
			batch = append(batch, b)
		}
	}
	return comparisons(cells, xi, batch, evidenceSeed, evidenceResamples)
}

// rerunSection sets each campaign run with the blind probe beside every
// campaign run under the fixed guard that ran some of the same cells,
// both compared on the cells they share, so what changed after the fix
// is read from the data and not from memory.
func rerunSection(cs []*campaign) []byte {
	var b bytes.Buffer
	for _, old := range cs {
		if !old.blindProbe() {
			continue
		}
		ids := map[string]bool{}
		for _, r := range old.cells {
			ids[r.Cell] = true
		}
		for _, nw := range cs {
			if nw.blindProbe() || nw == old {
				continue
			}
			shared := map[string]bool{}
			for _, r := range nw.cells {
				if ids[r.Cell] {
					shared[r.Cell] = true
				}
			}
			if len(shared) == 0 {
				continue
			}
			before := old.restrictedComparisons(shared)
			after := map[string]*Comparison{}
			for _, x := range nw.restrictedComparisons(shared) {
				if x.Profile == "" {
					after[rerunKey(x)] = x
				}
			}
			var rows []string
			for _, x := range before {
				y := after[rerunKey(x)]
				if x.Profile != "" || y == nil {
					continue
				}
				change := "same verdict"
				if x.Verdict != y.Verdict {
					change = fmt.Sprintf("**%s -> %s**", x.Verdict, y.Verdict)
				}
				n := fmt.Sprint(x.Configurations)
				if y.Configurations != x.Configurations {
					n += fmt.Sprintf(" / %d", y.Configurations)
				}
				rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s | %s: %s | %s: %s | %s |", x.Experiment, protoWords(x.Protocol), x.Start,
					x.Loss, metricShort(x.Metric), n, x.Verdict, estimateText(x), y.Verdict, estimateText(y), change))
			}
			if len(rows) == 0 {
				continue
			}
			if b.Len() == 0 {
				b.WriteString("\n### Re-runs under the fixed guard: before and after\n\n")
				b.WriteString("Each campaign run with the blind probe beside a campaign of the fixed guard that ran some of the same cells " +
					"(same cell ids: experiment, profile, loss, transport, QoS, pattern, size, interval), both compared on the shared cells only, " +
					"all profiles pooled, with the same bootstrap. A changed verdict is a result that did not survive (or appeared) once the host " +
					"was shown idle and the concurrency bounded.\n")
			}
			fmt.Fprintf(&b, "\n**%s** (blind probe) against **%s** (fixed guard), %d cells in common:\n\n", old.name, nw.name, len(shared))
			b.WriteString("| experiment | protocol | start | loss | metric | configs | before | after | verdict |\n|---|---|---|---|---|---|---|---|---|\n")
			for _, r := range rows {
				b.WriteString(r + "\n")
			}
		}
	}
	return b.Bytes()
}

func rerunKey(c *Comparison) string {
	return c.Experiment + "\x00" + c.Protocol + "\x00" + c.Start + "\x00" + c.Loss + "\x00" + c.Metric
}
