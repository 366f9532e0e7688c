package kvlog

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
)

const (
	magic      = "IOTQKVL1"
	headerSize = 8 // a batch's length and CRC
	kindPut    = 1
	kindDelete = 2

	// MaxKey and MaxValue bound a record: larger ones are refused.
	MaxKey   = 1 << 16
	MaxValue = 1 << 28 // an MQTT packet is at most 256 MiB
	// maxBatch bounds a batch's body as replay accepts it.
	maxBatch = 1 << 31

	// A file is compacted when it exceeds compactMin and holds more than
	// compactRatio times the bytes of its live records.
	compactMin   = 8 << 20
	compactRatio = 4
	// compactChunk is the size of the batches a compaction writes.
	compactChunk = 1 << 20
	// compactSuffix names a compaction's new file, next to the log.
	compactSuffix = ".compact"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Op is one change of a batch: a put of Value under Key, or a delete of
// Key if Value is nil.
type Op struct {
	Key   string
	Value []byte
}

// Log is an open log file. Its methods are not safe for concurrent use: one
// writer owns it.
type Log struct {
	f         *os.File
	path      string
	sync      bool
	size      int64          // bytes of the file that hold whole batches
	live      map[string]put // each live key's value
	liveBytes int64          // what the live puts take in the file
	buf       []byte         // a batch being encoded
	last      map[string]int // a batch's last op of each key
	changes   []change       // a batch's ops, applied to live once written
	broken    error          // a write failed and the file could not be cut back
	compactAt int64          // compactMin, smaller in tests
}

// put locates a live key's value in the file; cost is what its op takes.
type put struct {
	off  int64
	n    int64
	cost int64
}

// change is an op of a batch being written: a put (at) or a delete.
type change struct {
	key   string
	at    put
	isPut bool
}

// Open opens the log at path, creating it if it does not exist, and
// replays it. A batch that is cut short or fails its checksum ends the
// log: it and anything after it are removed (a crash during a write leaves
// at most the last batch incomplete). With sync, every Write is flushed to
// the disk before it returns. dropped reports how many bytes were removed.
func Open(path string, sync bool) (l *Log, dropped int64, err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("kvlog: open %s: %w", path, err)
	}
	if err := lock(f); err != nil {
		_ = f.Close()
		return nil, 0, fmt.Errorf("kvlog: lock %s: %w (is another process using it?)", path, err)
	}
	// A compaction a crash interrupted leaves its new file behind, not
	// yet in place of the log: the log is whole without it.
	if err := os.Remove(path + compactSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		_ = f.Close()
		return nil, 0, fmt.Errorf("kvlog: remove the unfinished compaction %s: %w", path+compactSuffix, err)
	}
	l = &Log{f: f, path: path, sync: sync, live: map[string]put{}, last: map[string]int{}, compactAt: compactMin}
	dropped, err = l.load()
	if err != nil {
		_ = f.Close()
		return nil, 0, err
	}
	return l, dropped, nil
}

func (l *Log) load() (dropped int64, err error) {
	st, err := l.f.Stat()
	if err != nil {
		return 0, fmt.Errorf("kvlog: stat %s: %w", l.path, err)
	}
	if st.Size() == 0 {
		return 0, l.initEmpty()
	}
	if err := l.replay(); err != nil {
		return 0, err
	}
	if l.size < st.Size() {
		dropped = st.Size() - l.size
		if err := l.f.Truncate(l.size); err != nil {
			return 0, fmt.Errorf("kvlog: cut %s back to its last whole batch (%d bytes): %w", l.path, l.size, err)
		}
	}
	if _, err := l.f.Seek(l.size, io.SeekStart); err != nil {
		return 0, fmt.Errorf("kvlog: seek %s: %w", l.path, err)
	}
	return dropped, nil
}

func (l *Log) initEmpty() error {
	if _, err := l.f.Write([]byte(magic)); err != nil {
		return fmt.Errorf("kvlog: write %s: %w", l.path, err)
	}
	if err := l.f.Sync(); err != nil {
		return fmt.Errorf("kvlog: sync %s: %w", l.path, err)
	}
	l.size = int64(len(magic))
	return syncDir(filepath.Dir(l.path))
}

// replay reads the file from the start and sets size to the end of its
// last whole batch.
func (l *Log) replay() error {
	r := bufio.NewReaderSize(io.NewSectionReader(l.f, 0, 1<<62), 64<<10)
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(r, head); err != nil || string(head) != magic {
		return fmt.Errorf("kvlog: %s is not a log of this kind (it does not begin with %q); move it away to start empty", l.path, magic)
	}
	off := int64(len(magic))
	var hdr [headerSize]byte
	var body []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			break // end of file, or a header cut short
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n == 0 || n > maxBatch {
			break
		}
		// Grown as it arrives: a damaged length must not allocate 2 GiB.
		body = body[:0]
		if _, err := io.CopyN(appendWriter{&body}, r, int64(n)); err != nil {
			break
		}
		if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(hdr[4:8]) {
			break
		}
		ops, err := decodeBatch(body, off+headerSize)
		if err != nil {
			break
		}
		for _, c := range ops {
			l.apply(c)
		}
		off += headerSize + int64(n)
	}
	l.size = off
	return nil
}

// appendWriter appends what is written to a slice.
type appendWriter struct{ b *[]byte }

func (w appendWriter) Write(p []byte) (int, error) {
	*w.b = append(*w.b, p...)
	return len(p), nil
}

// decodeBatch returns the ops of a batch whose body starts at offset base
// of the file.
func decodeBatch(body []byte, base int64) ([]change, error) {
	var ops []change
	for i := 0; i < len(body); {
		start := i
		kind := body[i]
		i++
		kl, w := binary.Uvarint(body[i:])
		if w <= 0 || kl == 0 || kl > MaxKey || kl > uint64(len(body)-i-w) {
			return nil, errors.New("key length out of range")
		}
		i += w
		key := string(body[i : i+int(kl)])
		i += int(kl)
		switch kind {
		case kindDelete:
			ops = append(ops, change{key: key})
		case kindPut:
			vl, w := binary.Uvarint(body[i:])
			if w <= 0 || vl > MaxValue || vl > uint64(len(body)-i-w) {
				return nil, errors.New("value length out of range")
			}
			i += w
			ops = append(ops, change{key: key, isPut: true, at: put{off: base + int64(i), n: int64(vl), cost: int64(i-start) + int64(vl)}})
			i += int(vl)
		default:
			return nil, errors.New("unknown op kind")
		}
	}
	return ops, nil
}

// apply makes c part of the live set.
func (l *Log) apply(c change) {
	if old, ok := l.live[c.key]; ok {
		l.liveBytes -= old.cost
		delete(l.live, c.key)
	}
	if c.isPut {
		l.live[c.key] = c.at
		l.liveBytes += c.at.cost
	}
}

// liveEntry is a live key and its value's place.
type liveEntry struct {
	key string
	at  put
}

// byOffset returns the live records in the order they were written.
func (l *Log) byOffset() []liveEntry {
	all := make([]liveEntry, 0, len(l.live))
	for k, p := range l.live {
		all = append(all, liveEntry{k, p})
	}
	slices.SortFunc(all, func(a, b liveEntry) int { return cmp.Compare(a.at.off, b.at.off) })
	return all
}

// Len returns the number of live records.
func (l *Log) Len() int { return len(l.live) }

// Size returns the bytes the file holds.
func (l *Log) Size() int64 { return l.size }

// Each calls fn with every live record, in the order they were written.
// value is valid only during the call.
func (l *Log) Each(fn func(key string, value []byte) error) error {
	return l.scanLive(fn)
}

// scanLive reads the live records in file order with one sequential pass
// over the file: one read per few hundred KiB, not one per record.
func (l *Log) scanLive(fn func(key string, value []byte) error) error {
	r := bufio.NewReaderSize(io.NewSectionReader(l.f, 0, l.size), 256<<10)
	var pos int64
	var buf []byte
	for _, e := range l.byOffset() {
		if _, err := r.Discard(int(e.at.off - pos)); err != nil {
			return fmt.Errorf("kvlog: read %s at %d: %w", l.path, e.at.off, err)
		}
		buf = slices.Grow(buf[:0], int(e.at.n))[:e.at.n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return fmt.Errorf("kvlog: read %s at %d: %w", l.path, e.at.off, err)
		}
		pos = e.at.off + e.at.n
		if err := fn(e.key, buf); err != nil {
			return err
		}
	}
	return nil
}

// Write appends ops as one batch, which a crash leaves whole or not at
// all. An op out of bounds (an empty key, a key over MaxKey, a value over
// MaxValue) is refused, and reported, without costing the others theirs. Within the batch only each key's last op counts, and a delete of a
// key that holds no record writes nothing: a put and the delete that
// follows it in the same batch cost nothing. The batch is written with one
// system call; with sync, flushed to the disk before Write returns. After
// a failed write the file is cut back to where it was.
func (l *Log) Write(ops []Op) error {
	if l.broken != nil {
		return l.broken
	}
	var refused error
	clear(l.last)
	for i, op := range ops {
		if !valid(op) {
			if refused == nil {
				refused = fmt.Errorf("kvlog: refused a record with a key of %d bytes and a value of %d (key 1 to %d bytes, value up to %d); the batch's other records are written", len(op.Key), len(op.Value), MaxKey, MaxValue)
			}
			continue
		}
		l.last[op.Key] = i
	}
	buf := append(l.buf[:0], 0, 0, 0, 0, 0, 0, 0, 0) // the header, filled in below
	changes := l.changes[:0]
	for i, op := range ops {
		if j, ok := l.last[op.Key]; !ok || j != i {
			continue
		}
		if _, isLive := l.live[op.Key]; op.Value == nil && !isLive {
			continue // it never reached the file
		}
		buf, changes = appendOp(buf, changes, l.size, op)
	}
	l.buf, l.changes = buf, changes
	if len(changes) == 0 {
		return refused
	}
	if len(buf)-headerSize > maxBatch {
		return fmt.Errorf("kvlog: a batch of %d bytes (at most %d)", len(buf)-headerSize, maxBatch)
	}
	seal(buf)
	if _, err := l.f.Write(buf); err != nil {
		return l.cutBack(fmt.Errorf("kvlog: append %d bytes to %s: %w", len(buf), l.path, err))
	}
	if l.sync {
		if err := l.f.Sync(); err != nil {
			return l.cutBack(fmt.Errorf("kvlog: sync %s: %w", l.path, err))
		}
	}
	l.size += int64(len(buf))
	for _, c := range changes {
		l.apply(c)
	}
	clear(l.changes)
	if cap(l.buf) > 4<<20 {
		l.buf, l.changes = nil, nil // a large batch's buffers are not kept
	}
	if l.size > l.compactAt && l.size > compactRatio*(l.liveBytes+int64(len(magic))) {
		if err := l.compact(); err != nil {
			return errors.Join(refused, err)
		}
	}
	return refused
}

// valid reports whether op is within the bounds of a record.
func valid(op Op) bool {
	return len(op.Key) > 0 && len(op.Key) <= MaxKey && len(op.Value) <= MaxValue
}

// appendOp encodes op at the end of buf, a batch to be written at offset
// base of the file, and records it in changes.
func appendOp(buf []byte, changes []change, base int64, op Op) ([]byte, []change) {
	start := len(buf)
	kind := byte(kindPut)
	if op.Value == nil {
		kind = kindDelete
	}
	buf = append(buf, kind)
	buf = binary.AppendUvarint(buf, uint64(len(op.Key)))
	buf = append(buf, op.Key...)
	c := change{key: op.Key}
	if kind == kindPut {
		buf = binary.AppendUvarint(buf, uint64(len(op.Value)))
		c.isPut = true
		c.at = put{off: base + int64(len(buf)), n: int64(len(op.Value)), cost: int64(len(buf)-start) + int64(len(op.Value))}
		buf = append(buf, op.Value...)
	}
	return buf, append(changes, c)
}

// seal fills in the header of the batch in buf.
func seal(buf []byte) {
	body := buf[headerSize:]
	binary.LittleEndian.PutUint32(buf[0:4], uint32(len(body)))
	binary.LittleEndian.PutUint32(buf[4:8], crc32.Checksum(body, castagnoli))
}

// cutBack removes what a failed write may have left after the last whole
// batch; if it cannot, the log refuses further writes.
func (l *Log) cutBack(err error) error {
	if terr := l.f.Truncate(l.size); terr != nil {
		l.broken = fmt.Errorf("%w; cutting the file back failed too (%v): no more writes", err, terr)
		return l.broken
	}
	if _, serr := l.f.Seek(l.size, io.SeekStart); serr != nil {
		l.broken = fmt.Errorf("%w; seeking back failed too (%v): no more writes", err, serr)
		return l.broken
	}
	return err
}

// compact writes the live records to a new file, which replaces the log.
func (l *Log) compact() error {
	tmp := l.path + compactSuffix
	nf, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("kvlog: compact %s: %w", l.path, err)
	}
	fail := func(err error) error {
		_ = nf.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("kvlog: compact %s: %w", l.path, err)
	}
	if _, err := nf.WriteString(magic); err != nil {
		return fail(err)
	}
	size := int64(len(magic))
	moved := make(map[string]put, len(l.live))
	var movedBytes int64
	batch := []byte{0, 0, 0, 0, 0, 0, 0, 0}
	var changes []change
	flush := func() error {
		if len(changes) == 0 {
			return nil
		}
		seal(batch)
		if _, err := nf.Write(batch); err != nil {
			return err
		}
		for _, c := range changes {
			moved[c.key] = c.at
			movedBytes += c.at.cost
		}
		size += int64(len(batch))
		batch, changes = batch[:headerSize], changes[:0]
		return nil
	}
	err = l.scanLive(func(key string, val []byte) error {
		batch, changes = appendOp(batch, changes, size, Op{Key: key, Value: val})
		if len(batch) >= compactChunk {
			return flush()
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	if err := flush(); err != nil {
		return fail(err)
	}
	if err := nf.Sync(); err != nil {
		return fail(err)
	}
	if err := lock(nf); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, l.path); err != nil {
		return fail(err)
	}
	_ = l.f.Close()
	l.f, l.size, l.live, l.liveBytes = nf, size, moved, movedBytes
	if err := syncDir(filepath.Dir(l.path)); err != nil {
		return err
	}
	return nil
}

// Close closes the file.
func (l *Log) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("kvlog: close %s: %w", l.path, err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("kvlog: open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("kvlog: sync directory %s: %w", dir, err)
	}
	return nil
}
