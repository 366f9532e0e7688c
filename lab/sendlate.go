package lab

import (
	"path/filepath"
	"time"

	"github.com/iotq/iotq/records"
)

// sendLateness returns how late each paced message of one publisher's
// records left: its send_ns minus its due time, message 0's send_ns plus
// seq*interval (client/measure anchors a paced schedule there, in the
// clock of send_ns), or minus its ready_ns where the records have it
// (readyLateness). Records without message 0 give nothing: their schedule
// is unknown.
func sendLateness(pubs []records.PubRecord, interval time.Duration) []time.Duration {
	if interval <= 0 {
		return nil
	}
	var anchor int64
	for _, p := range pubs {
		if p.Seq == 0 && p.SendNs > 0 {
			anchor = p.SendNs
			break
		}
	}
	if anchor == 0 {
		return nil
	}
	out := make([]time.Duration, 0, len(pubs))
	for _, p := range pubs {
		if p.SendNs <= 0 || p.Seq < 0 {
			continue
		}
		out = append(out, readyLateness(p, anchor+p.Seq*int64(interval)))
	}
	return out
}

// readyLateness is how late one paced message left for reasons of the
// host: send_ns minus ready_ns, the later of its due time and the return
// of the publisher's previous hand-over. A hand-over that blocks (a large
// message, a full socket or stream) delays the next message by what the
// transport held back, which E9 measures and the timing guard must not
// take for a late host. Records before version 8 have no ready_ns: their
// lateness counts from the due time.
func readyLateness(p records.PubRecord, due int64) time.Duration {
	from := due
	if p.ReadyNs > 0 {
		from = max(due, p.ReadyNs)
	}
	return max(time.Duration(p.SendNs-from), 0)
}

// addSendLateness adds the send lateness of a repetition's paced
// publishers to the cell's: the measured publisher of a periodic cell and
// the background publishers of a shared medium, which publish at the
// cell's interval whatever the pattern. A file that cannot be read adds
// nothing (the repetition's own checks report it).
func (cr *cellRun) addSendLateness(repDir string) {
	iv := cr.c.Interval()
	if iv <= 0 {
		return
	}
	var files []string
	if cr.c.Pattern == PatternPeriodic {
		files = append(files, "pub.csv")
	}
	for i := 2; i <= cr.c.Publishers; i++ {
		files = append(files, pubName(i)+".csv")
	}
	for _, f := range files {
		pubs, err := readNodeRecords[records.PubRecord](filepath.Join(repDir, f))
		if err != nil {
			continue
		}
		cr.sendLate = append(cr.sendLate, sendLateness(pubs, iv)...)
	}
	if cr.c.Pattern == PatternMultiTopic {
		// its schedule is the topics' slots, not seq*interval (lab/e9.go)
		if pubs, err := readNodeRecords[records.PubRecord](filepath.Join(repDir, "pub.csv")); err == nil {
			cr.sendLate = append(cr.sendLate, multiTopicLateness(pubs, cr.c)...)
		}
	}
}
