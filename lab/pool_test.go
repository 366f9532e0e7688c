package lab

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/iotq/iotq/records"
)

// poolSpecs is testSpecs with reps repetitions and seed.
func poolSpecs(t *testing.T, reps int, seed int64) []Spec {
	specs := testSpecs(t)
	specs[0].Repetitions, specs[0].Seed = reps, seed
	return specs
}

func TestPoolNumbersRepetitionsOneAfterTheOther(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	if _, err := Run(context.Background(), poolSpecs(t, 2, 1), Options{Dir: a, Runner: &fakeRunner{}}); err != nil {
		t.Fatal(err)
	}
	cells := mustCampaign(t, a).Cells
	failing := cells[1]
	if _, err := Run(context.Background(), poolSpecs(t, 3, 7), Options{Dir: b, Runner: &fakeRunner{failID: failing}}); err != nil {
		t.Fatal(err)
	}
	// Captures of one cell in both: the pooled capture holds both's packets.
	pcapHead := []byte{0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 1, 0, 0, 0}
	for i, d := range []string{a, b} {
		rec := append(make([]byte, 16), byte(i), byte(i))
		rec[8], rec[12] = 2, 2 // captured and original length 2
		if err := os.WriteFile(filepath.Join(d, DirCells, cells[0], records.FilePubPcap), append(append([]byte{}, pcapHead...), rec...), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(d, DirCells, cells[0], "rep-1"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, DirCells, cells[0], "rep-1", "pub.cmd"), []byte(d), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(base, "pooled")
	if err := Pool(out, []string{a, b}); err != nil {
		t.Fatal(err)
	}
	msgs, _, err := records.ReadFile[records.Message](filepath.Join(out, FileMessages))
	if err != nil {
		t.Fatal(err)
	}
	bMsgs, _, _ := records.ReadFile[records.Message](filepath.Join(b, DirCells, cells[0], FileMessages))
	reps := map[string]map[int]int{}
	for _, m := range msgs {
		if reps[m.Cell] == nil {
			reps[m.Cell] = map[int]int{}
		}
		reps[m.Cell][m.Rep]++
	}
	for _, id := range cells {
		want := 5
		if id == failing {
			want = 2 // the failed cell of b recorded nothing
		}
		if got := len(reps[id]); got != want {
			t.Errorf("cell %s: %d repetitions pooled, want %d (%v)", id, got, want, reps[id])
		}
	}
	// b's repetition 1 is the pooled repetition 3, with b's delays.
	var pooled3 []int64
	for _, m := range msgs {
		if m.Cell == cells[0] && m.Rep == 3 {
			pooled3 = append(pooled3, m.SendNs)
		}
	}
	var b1 []int64
	for _, m := range bMsgs {
		if m.Rep == 1 {
			b1 = append(b1, m.SendNs)
		}
	}
	if len(b1) == 0 || !slices.Equal(pooled3, b1) {
		t.Errorf("pooled repetition 3 %v is not b's repetition 1 %v", pooled3, b1)
	}
	d, ok, err := readDone(filepath.Join(out, DirCells, cells[0]))
	if err != nil || !ok || d.Cell.Repetitions != 5 || d.RepsOK != 5 || d.Published != 5*d.Cell.Messages || d.Status != StatusOK {
		t.Fatalf("pooled done marker: %+v %v", d, err)
	}
	if fd, _, _ := readDone(filepath.Join(out, DirCells, failing)); fd.Status != StatusFailed || !strings.Contains(fd.Error, "repetitions 3-5") {
		t.Errorf("a cell that failed in one source: status %q error %q", fd.Status, fd.Error)
	}
	if cmd, err := os.ReadFile(filepath.Join(out, DirCells, cells[0], "rep-3", "pub.cmd")); err != nil || string(cmd) != b {
		t.Errorf("b's rep-1 should be the pooled rep-3: %q %v", cmd, err)
	}
	pc, err := os.ReadFile(filepath.Join(out, DirCells, cells[0], records.FilePubPcap))
	if err != nil || len(pc) != 24+2*18 {
		t.Errorf("pooled capture: %d bytes (%v), want one header and both packets (60)", len(pc), err)
	}
	var m Manifest
	mb, _ := os.ReadFile(filepath.Join(out, FileManifest))
	if err := json.Unmarshal(mb, &m); err != nil || m.Shard != records.ShardPooled || len(m.Shards) != 2 || m.Cells.Total != len(cells) {
		t.Fatalf("pooled manifest: %v %s", err, mb)
	}
}

func TestPoolRefusesWhatIsNoRepetition(t *testing.T) {
	base := t.TempDir()
	a, same, other := filepath.Join(base, "a"), filepath.Join(base, "same"), filepath.Join(base, "other")
	for dir, specs := range map[string][]Spec{a: poolSpecs(t, 1, 1), same: poolSpecs(t, 2, 1)} {
		if _, err := Run(context.Background(), specs, Options{Dir: dir, Runner: &fakeRunner{}}); err != nil {
			t.Fatal(err)
		}
	}
	os2 := poolSpecs(t, 1, 5)
	os2[0].Losses = []Percent{0, 2, 5}
	if _, err := Run(context.Background(), os2, Options{Dir: other, Runner: &fakeRunner{}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dirs []string
		want string
	}{
		{[]string{a, same}, "same seed"},
		{[]string{a, other}, "ran other cells"},
		{[]string{a}, "at least two"},
	} {
		err := Pool(filepath.Join(t.TempDir(), "out"), c.dirs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("pool %v: %v, want an error saying %q", c.dirs, err, c.want)
		}
	}
}

func mustCampaign(t *testing.T, dir string) campaignFile {
	t.Helper()
	cf, err := readCampaignFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	return cf
}
