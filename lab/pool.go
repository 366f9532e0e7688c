package lab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/iotq/iotq/records"
)

// Pool joins campaigns that ran the same cells with different seeds into
// out, as repetitions of one campaign: a cell's repetitions are those of
// every directory that completed it, numbered one after the other (the
// first directory's keep their numbers, the second's follow, ...). Why:
// the studies ask for more repetitions than one session's campaign can
// run, and identical cells already run must count (issue 18). The cells
// must be identical except for their repetitions and seed, and the seeds
// must differ: the same seed would draw the same losses again, which
// would add no independent repetition.
//
// Record files are concatenated with their rep column renumbered; the
// pcaps of a cell are concatenated (their timestamps are absolute, so
// per-repetition windows still hold); a later source's other files go to
// CELL/source-N/. The manifest lists every source's manifest and says
// "pooled".
func Pool(out string, dirs []string) error {
	if len(dirs) < 2 {
		return errors.New("pool: give at least two results directories")
	}
	if entries, err := os.ReadDir(out); err == nil && len(entries) > 0 {
		return fmt.Errorf("pool: %s is not empty: choose a new output directory", out)
	}
	var first campaignFile
	var mans []Manifest
	for i, dir := range dirs {
		cf, err := readCampaignFile(dir)
		if err != nil {
			return fmt.Errorf("pool: %w", err)
		}
		if i == 0 {
			first = cf
		} else if !slices.Equal(cf.Cells, first.Cells) {
			return fmt.Errorf("pool: %s ran other cells than %s (scenario %q scale %q, %d cells vs %q %q, %d cells): pool campaigns of the same scenario and scale", dir, dirs[0], cf.Scenario, cf.Scale, len(cf.Cells), first.Scenario, first.Scale, len(first.Cells))
		}
		m, ok := readManifest(dir)
		if !ok {
			return fmt.Errorf("pool: %s has no readable %s", dir, FileManifest)
		}
		if m.Shard != "1/1" && m.Shard != records.ShardMerged && m.Shard != records.ShardPooled {
			return fmt.Errorf("pool: %s is shard %s of a campaign: merge its shards first (iotq lab merge)", dir, m.Shard)
		}
		mans = append(mans, m)
	}
	if err := os.MkdirAll(filepath.Join(out, DirCells), 0o755); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	yml, err := os.ReadFile(filepath.Join(dirs[0], FileScenario))
	if err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(out, FileScenario), yml); err != nil {
		return err
	}
	for _, id := range first.Cells {
		if err := poolCell(out, dirs, id); err != nil {
			return fmt.Errorf("pool: cell %s: %w", id, err)
		}
	}
	cf := campaignFile{Scenario: first.Scenario, Scale: first.Scale, Shard: "1/1", Cells: first.Cells, Mine: first.Cells}
	if err := writeJSONAtomic(filepath.Join(out, FileCampaign), cf); err != nil {
		return err
	}
	if err := Aggregate(out, first.Cells); err != nil {
		return err
	}
	done, err := completedCells(out, first.Cells)
	if err != nil {
		return err
	}
	man := mans[0]
	man.Shards = mans
	man.RunSpans = nil // each source's are in its manifest under shards
	return writeCombinedManifest(out, man, records.ShardPooled, first.Cells, done)
}

func readCampaignFile(dir string) (campaignFile, error) {
	var cf campaignFile
	b, err := os.ReadFile(filepath.Join(dir, FileCampaign))
	if err != nil {
		return cf, fmt.Errorf("%s is not a results directory (no %s): %w", dir, FileCampaign, err)
	}
	if err := json.Unmarshal(b, &cf); err != nil {
		return cf, fmt.Errorf("%s: corrupt %s: %w", dir, FileCampaign, err)
	}
	return cf, nil
}

// poolSource is one directory's completed run of a cell.
type poolSource struct {
	dir    string // DIR/cells/CELL
	done   Done
	offset int // added to its repetition numbers
}

// poolCell writes out/cells/id from the directories that completed it; a
// cell completed nowhere stays pending.
func poolCell(out string, dirs []string, id string) error {
	var srcs []poolSource
	offset := 0
	for _, dir := range dirs {
		cd := filepath.Join(dir, DirCells, id)
		d, ok, err := readDone(cd)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if len(srcs) > 0 {
			if err := samePooledCell(srcs[0].done.Cell, d.Cell, srcs[0].dir, cd); err != nil {
				return err
			}
			for _, s := range srcs {
				if s.done.Cell.Seed == d.Cell.Seed {
					return fmt.Errorf("%s and %s ran with the same seed %d: their emulators drew the same losses, so the second adds no independent repetition; run the second campaign with another seed (lab run --seed N)", s.dir, cd, d.Cell.Seed)
				}
			}
		}
		srcs = append(srcs, poolSource{dir: cd, done: d, offset: offset})
		offset += d.Cell.Repetitions
	}
	if len(srcs) == 0 {
		return nil
	}
	dst := filepath.Join(out, DirCells, id)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, rf := range poolRecordFiles() {
		if err := rf.pool(filepath.Join(dst, rf.name), srcs); err != nil {
			return fmt.Errorf("%s: %w", rf.name, err)
		}
	}
	for i, s := range srcs {
		if err := poolCellFiles(dst, s, i); err != nil {
			return err
		}
	}
	return writeJSONAtomic(filepath.Join(dst, FileDone), pooledDone(srcs))
}

// samePooledCell reports how two runs of a cell differ in anything but
// their repetitions and seed.
func samePooledCell(a, b records.Cell, da, db string) error {
	a.Repetitions, b.Repetitions, a.Seed, b.Seed = 0, 0, 0, 0
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if bytes.Equal(ja, jb) {
		return nil
	}
	return fmt.Errorf("%s and %s are not the same cell (their done.json cells differ in more than repetitions and seed): pool only campaigns of one scenario at one scale", da, db)
}

// pooledDone is the done marker of a pooled cell.
func pooledDone(srcs []poolSource) Done {
	d := srcs[0].done
	d.Cell.Repetitions = 0
	var errs []string
	var timings []*records.CellTiming
	for i, s := range srcs {
		d.Cell.Repetitions += s.done.Cell.Repetitions
		if i > 0 {
			d.Published += s.done.Published
			d.Delivered += s.done.Delivered
			d.RepsOK += s.done.RepsOK
			d.StartNs = min(d.StartNs, s.done.StartNs)
			d.EndNs = max(d.EndNs, s.done.EndNs)
		}
		if s.done.Status != StatusOK {
			d.Status = StatusFailed
			errs = append(errs, fmt.Sprintf("repetitions %d-%d: %s", s.offset+1, s.offset+s.done.Cell.Repetitions, s.done.Error))
		}
		timings = append(timings, s.done.Timing)
	}
	d.Error = strings.Join(errs, "; ")
	d.Timing = combineCellTiming(timings)
	return d
}

// combineCellTiming pools cells' timing records: their histograms add,
// percentiles come from the sum, the status is the worst.
func combineCellTiming(ts []*records.CellTiming) *records.CellTiming {
	var out *records.CellTiming
	var send, host []*records.Lateness
	for _, t := range ts {
		if t == nil {
			continue
		}
		if out == nil {
			out = &records.CellTiming{Status: t.Status}
		}
		out.Status = worseTimingStatus(out.Status, t.Status)
		send, host = append(send, t.Send), append(host, t.Host)
	}
	if out == nil {
		return nil
	}
	out.Send, out.Host = combineLateness(send), combineLateness(host)
	return out
}

func combineLateness(ls []*records.Lateness) *records.Lateness {
	h := latHist{}
	var largest int64
	for _, l := range ls {
		if l == nil {
			continue
		}
		h.addBuckets(l.Hist)
		largest = max(largest, int64(l.Max))
	}
	return histLateness(h, time.Duration(largest))
}

// worseTimingStatus returns the worse of two timing statuses (ok < warn <
// fail; "" is unknown and loses to any).
func worseTimingStatus(a, b string) string {
	rank := func(s string) int {
		switch s {
		case TimingOK:
			return 1
		case TimingWarn:
			return 2
		case TimingFail, TimingRefused:
			return 3
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

// poolRecordFile concatenates one per-cell record file of pooled runs.
type poolRecordFile struct {
	name string
	pool func(dst string, srcs []poolSource) error
}

func poolRecordFileOf[T any](name string) poolRecordFile {
	return poolRecordFile{name: name, pool: func(dst string, srcs []poolSource) error {
		return writeRecords(dst, func(out *records.Writer[T]) error {
			for _, s := range srcs {
				rows, _, err := records.ReadFile[T](filepath.Join(s.dir, name))
				if errors.Is(err, fs.ErrNotExist) || errors.Is(err, records.ErrNoHeader) {
					continue
				}
				if err != nil {
					return err
				}
				for _, r := range rows {
					if err := shiftRep(&r, s.offset); err != nil {
						return err
					}
					if err := out.Write(r); err != nil {
						return err
					}
				}
			}
			return nil
		})
	}}
}

// poolRecordFiles lists the per-cell record files (recordFiles) and how
// each is pooled.
func poolRecordFiles() []poolRecordFile {
	return []poolRecordFile{
		poolRecordFileOf[records.Message](FileMessages),
		poolRecordFileOf[records.Connection](FileConnections),
		poolRecordFileOf[records.LinkCount](FileLinks),
		poolRecordFileOf[records.CPU](FileCPU),
		poolRecordFileOf[records.Completion](FileCompletions),
	}
}

// shiftRep adds offset to a record row's Rep field (every per-repetition
// record type has one).
func shiftRep(row any, offset int) error {
	f := reflect.ValueOf(row).Elem().FieldByName("Rep")
	if !f.IsValid() || f.Kind() != reflect.Int {
		return fmt.Errorf("record type %T has no Rep field", row)
	}
	f.SetInt(f.Int() + int64(offset))
	return nil
}

// poolCellFiles copies the files of source number i other than its
// record files and done marker: repetition directories renumbered, pcaps
// appended, the rest (logs, commands) of a later source into source-N/.
func poolCellFiles(dst string, s poolSource, i int) error {
	pooled := map[string]bool{FileDone: true}
	for _, rf := range poolRecordFiles() {
		pooled[rf.name] = true
	}
	return filepath.WalkDir(s.dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.dir, path)
		if rel == "." {
			return nil
		}
		top, rest, _ := strings.Cut(rel, string(filepath.Separator))
		if n, ok := repDirNumber(top); ok {
			if e.IsDir() {
				return nil
			}
			to := filepath.Join(dst, "rep-"+strconv.Itoa(n+s.offset), rest)
			if e.Name() == records.FileE11 {
				return shiftE11(to, path, s.offset)
			}
			if e.Name() == records.FileE10 {
				return shiftE10(to, path, s.offset) // lab/e10.go
			}
			return copyFile(to, path)
		}
		switch {
		case e.IsDir():
			if top == "broker-state" {
				return filepath.SkipDir // the broker's database: not a result
			}
			return nil
		case pooled[rel]:
			return nil
		case strings.HasSuffix(e.Name(), ".pcap"):
			return appendPcap(filepath.Join(dst, rel), path)
		case i == 0:
			return copyFile(filepath.Join(dst, rel), path)
		default:
			return copyFile(filepath.Join(dst, fmt.Sprintf("source-%d", i+1), rel), path)
		}
	})
}

// repDirNumber parses "rep-N".
func repDirNumber(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "rep-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 0
}

func shiftE11(dst, src string, offset int) error {
	rows, _, err := records.ReadFile[records.E11Row](src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return writeRecords(dst, func(out *records.Writer[records.E11Row]) error {
		for _, r := range rows {
			r.Rep += offset
			if err := out.Write(r); err != nil {
				return err
			}
		}
		return nil
	})
}

func copyFile(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// pcapHeaderLen is the size of a classic pcap file's global header.
const pcapHeaderLen = 24

// appendPcap appends the packets of the pcap src to dst (created with
// src's header when absent). The two must have the same header (byte
// order, version, snap length, link type).
func appendPcap(dst, src string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if len(b) < pcapHeaderLen {
		return nil // empty capture: nothing to append
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	head := make([]byte, pcapHeaderLen)
	n, err := io.ReadFull(f, head)
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		_, err = f.Write(b)
		return err
	case err != nil:
		return fmt.Errorf("%s: %w", dst, err)
	case !bytes.Equal(head, b[:pcapHeaderLen]):
		return fmt.Errorf("%s and %s have different pcap headers (link type or snap length): cannot append", dst, src)
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	_, err = f.Write(b[pcapHeaderLen:])
	return err
}
