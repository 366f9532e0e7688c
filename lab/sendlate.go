package lab

import (
	"path/filepath"
	"time"

	"github.com/iotq/iotq/records"
)

// sendLateness returns how late each paced message of one publisher's
// records left: its send_ns minus its due time, message 0's send_ns plus
// seq*interval (client/measure anchors a paced schedule there, in the
// clock of send_ns). Records without message 0 give nothing: their
// schedule is unknown.
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
		due := anchor + p.Seq*int64(interval)
		out = append(out, max(time.Duration(p.SendNs-due), 0))
	}
	return out
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
