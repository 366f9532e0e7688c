package report

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files and testdata/results from the fixture generator")

func generate(t *testing.T, dir string, opts Options) (*Summary, string) {
	t.Helper()
	opts.Dir = dir
	if opts.Out == "" {
		opts.Out = filepath.Join(t.TempDir(), "out")
	}
	s, err := Generate(context.Background(), opts)
	if err != nil {
		t.Fatalf("Generate: %v", err)
	}
	return s, opts.Out
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		diff := firstDiff(string(want), string(got))
		t.Errorf("%s differs from %s (rerun with -update if the change is intended):\n%s", name, path, diff)
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return "line " + itoa(i+1) + ":\n- " + x + "\n+ " + y
		}
	}
	return ""
}

func itoa(i int) string { return fmtInt(int64(i)) }

func TestReportOnFixture(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "results")
	os.MkdirAll(dir, 0o755)
	fx := writeFixture(t, dir)
	if *update {
		// keep a browsable copy of the fixture next to the golden files
		os.RemoveAll(filepath.Join("testdata", "results"))
		os.MkdirAll(filepath.Join("testdata", "results"), 0o755)
		writeFixture(t, filepath.Join("testdata", "results"))
	}
	s, out := generate(t, dir, Options{})

	t.Run("every output file exists", func(t *testing.T) {
		for _, f := range []string{FileMarkdown, FileHTML, FileTables, FileSummary} {
			if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
				t.Errorf("%s: %v", f, err)
			}
		}
		if len(s.Figures) < 8 {
			t.Errorf("only %d figures drawn", len(s.Figures))
		}
		for _, f := range s.Figures {
			for _, ext := range []string{".png", ".svg"} {
				if st, err := os.Stat(filepath.Join(out, DirFigures, f.Name+ext)); err != nil || st.Size() < 500 {
					t.Errorf("figure %s%s: %v", f.Name, ext, err)
				}
			}
		}
	})
	t.Run("html references every figure and loads nothing from the network", func(t *testing.T) {
		h, _ := os.ReadFile(filepath.Join(out, FileHTML))
		for _, f := range s.Figures {
			for _, ref := range []string{`id="fig-` + f.Name + `"`, DirFigures + "/" + f.Name + ".png"} {
				if !bytes.Contains(h, []byte(ref)) {
					t.Errorf("report.html lacks %s", ref)
				}
			}
		}
		if n := bytes.Count(h, []byte("<svg")); n < len(s.Figures) {
			t.Errorf("report.html inlines %d SVGs for %d figures", n, len(s.Figures))
		}
		for _, bad := range []string{"http://", "https://", "<script src", "<link "} {
			if bytes.Contains(h, []byte(bad)) && !bytes.Contains(h, []byte("http://www.w3.org")) {
				t.Errorf("report.html contains %q", bad)
			}
		}
	})
	t.Run("statistics are the ones the fixture implies", func(t *testing.T) {
		byID := map[string]*CellResult{}
		for _, c := range s.Cells {
			byID[c.Cell] = c
		}
		if len(byID) != len(fx.cells) {
			t.Fatalf("%d cells, want %d", len(byID), len(fx.cells))
		}
		for _, fc := range fx.cells {
			c := byID[fc.id]
			if c.Kind == KindPeriodic {
				want := float64(fc.messages-fx.lost[fc.id]) / float64(fc.messages)
				if !approx(c.DeliveryRatio, want) {
					t.Errorf("%s: delivery %v, want %v", fc.id, c.DeliveryRatio, want)
				}
				if fc.qos == 1 && c.DeliveryRatio != 1 {
					t.Errorf("%s: QoS 1 delivery ratio %v", fc.id, c.DeliveryRatio)
				}
				if c.DelayMs.Min < c.DelayBoundMs {
					t.Errorf("%s: a delay (%v ms) below the bound %v ms", fc.id, c.DelayMs.Min, c.DelayBoundMs)
				}
			}
			if c.Kind == KindB {
				want := fx.startup[fc.id]
				if len(c.startup) != len(want) {
					t.Fatalf("%s: %d startup values, want %d", fc.id, len(c.startup), len(want))
				}
				for i := range want {
					if !approx(c.startup[i], want[i]) {
						t.Errorf("%s rep %d: startup %v ms, want %v", fc.id, i, c.startup[i], want[i])
					}
				}
				if c.Resumed != fc.reps || (fc.transport == "quic") != (c.ZeroRTT == fc.reps) {
					t.Errorf("%s: resumed %d, 0-RTT %d", fc.id, c.Resumed, c.ZeroRTT)
				}
				if c.StartupMs.Min < c.StartupBoundMs {
					t.Errorf("%s: startup %v ms below bound %v ms", fc.id, c.StartupMs.Min, c.StartupBoundMs)
				}
			}
			if c.Kind == KindA && c.CompletionS.N != fc.reps {
				t.Errorf("%s: %d completion times, want %d", fc.id, c.CompletionS.N, fc.reps)
			}
		}
		if len(s.Xi) != 2 {
			t.Fatalf("%d xi rows, want 2 (wifi loss 0 and 5)", len(s.Xi))
		}
		for _, x := range s.Xi {
			if x.Pairs != 5 || !(x.OfMeans.Lo <= x.OfMeans.Estimate && x.OfMeans.Estimate <= x.OfMeans.Hi) {
				t.Errorf("xi %+v", x)
			}
		}
		pcapCell := byID["E1_wifi_loss0_periodic_qos0_100B_every1s_quic"]
		if pcapCell.Energy == nil || !strings.HasSuffix(pcapCell.Energy.RadioSource, "pub.pcap") || pcapCell.Energy.Radio.TotalJ <= 0 {
			t.Errorf("pcap-driven energy missing: %+v", pcapCell.Energy)
		}
		other := byID["E1_cellular_loss0_periodic_qos0_100B_every1s_quic"]
		if other.Energy == nil || !strings.HasPrefix(other.Energy.RadioSource, "links.csv") || other.Energy.Technology != "lte" {
			t.Errorf("totals-driven energy missing: %+v", other.Energy)
		}
	})
	t.Run("markdown and csv match the golden files", func(t *testing.T) {
		md, _ := os.ReadFile(filepath.Join(out, FileMarkdown))
		golden(t, "report.md", md)
		csv, _ := os.ReadFile(filepath.Join(out, FileTables))
		golden(t, "tables.csv", csv)
	})
	t.Run("a second run writes identical files", func(t *testing.T) {
		_, out2 := generate(t, dir, Options{})
		for _, f := range []string{FileTables, FileSummary, FileMarkdown, FileHTML} {
			a, _ := os.ReadFile(filepath.Join(out, f))
			b, _ := os.ReadFile(filepath.Join(out2, f))
			if !bytes.Equal(a, b) {
				t.Errorf("%s differs between runs", f)
			}
		}
	})
}

func TestMissingFilesAreTolerated(t *testing.T) {
	base := filepath.Join(t.TempDir(), "base")
	os.MkdirAll(base, 0o755)
	writeFixture(t, base)
	for _, missing := range []string{"manifest.json", "cells.csv", "messages.csv", "connections.csv", "links.csv", "cpu.csv", "completions.csv", "cells"} {
		t.Run("without "+missing, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "r")
			if err := exec.Command("cp", "-r", base, dir).Run(); err != nil {
				t.Fatal(err)
			}
			os.RemoveAll(filepath.Join(dir, missing))
			s, out := generate(t, dir, Options{NoFigures: missing != "messages.csv"})
			md, _ := os.ReadFile(filepath.Join(out, FileMarkdown))
			if missing != "cells" && !bytes.Contains(md, []byte(missing+" is missing")) {
				t.Errorf("report.md does not say %s is missing; notes: %v", missing, s.Notes)
			}
			if len(s.Cells) == 0 {
				t.Error("no cells")
			}
			if missing == "cells.csv" {
				for _, c := range s.Cells {
					if c.Profile == "" || c.Experiment == "" || c.Pattern == "" || c.Link.Source != "cells/"+c.Cell+"/done.json" || c.Link.PubRateBps == 0 {
						t.Errorf("cell %s: parameters not taken from its done.json: %+v", c.Cell, c)
						break
					}
				}
			}
		})
	}
	t.Run("only a manifest", func(t *testing.T) {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(`{"seed": 3}`), 0o644)
		s, _ := generate(t, dir, Options{})
		if len(s.Cells) != 0 || len(s.Figures) != 0 {
			t.Errorf("cells %d figures %d", len(s.Cells), len(s.Figures))
		}
	})
	t.Run("a broken pcap falls back to totals", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "r")
		exec.Command("cp", "-r", base, dir).Run()
		p := filepath.Join(dir, "cells", "E1_wifi_loss0_periodic_qos0_100B_every1s_quic", "pub.pcap")
		os.WriteFile(p, []byte("garbage, not a capture"), 0o644)
		s, _ := generate(t, dir, Options{NoFigures: true})
		for _, c := range s.Cells {
			if c.Cell == "E1_wifi_loss0_periodic_qos0_100B_every1s_quic" && !strings.HasPrefix(c.Energy.RadioSource, "links.csv") {
				t.Errorf("radio source %q", c.Energy.RadioSource)
			}
		}
		if !strings.Contains(strings.Join(s.Notes, "\n"), "pub.pcap could not be read") {
			t.Errorf("notes: %v", s.Notes)
		}
	})
}

func TestNotAResultsDirectory(t *testing.T) {
	empty := t.TempDir()
	os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("hi"), 0o644)
	_, err := Generate(context.Background(), Options{Dir: empty, Out: t.TempDir()})
	if !errors.Is(err, ErrNotResults) || !strings.Contains(err.Error(), "iotq lab run") {
		t.Errorf("empty dir: err = %v", err)
	}
	_, err = Generate(context.Background(), Options{Dir: filepath.Join(empty, "nope"), Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("missing dir: err = %v", err)
	}
	_, err = Generate(context.Background(), Options{Dir: filepath.Join(empty, "notes.txt"), Out: t.TempDir()})
	if !errors.Is(err, ErrNotResults) {
		t.Errorf("a file: err = %v", err)
	}
}

func TestPowerLogAndParameters(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	plog := filepath.Join(t.TempDir(), "power.csv")
	var b strings.Builder
	b.WriteString("timestamp,watts\n")
	for i := int64(0); i < 4000; i++ { // 1 sample per second, 2.5 W constant
		b.WriteString(itoa64(fixT0+i*1_000_000_000) + ",2.5\n")
	}
	os.WriteFile(plog, []byte(b.String()), 0o644)
	params := filepath.Join(t.TempDir(), "e.json")
	os.WriteFile(params, []byte(`{"wifi": {"tail_s": 0.5, "source": "test"}}`), 0o644)
	s, _ := generate(t, dir, Options{NoFigures: true, PowerLog: plog, EnergyParams: params, CPUWatts: 3})
	if s.CPUWatts[""] != 3 || s.EnergyModels["wifi"].TailS != 0.5 || s.EnergyModels["wifi"].Source != "test" {
		t.Errorf("parameters not applied: cpu %v wifi %+v", s.CPUWatts, s.EnergyModels["wifi"])
	}
	for _, c := range s.Cells {
		e := c.Energy
		if e == nil {
			t.Fatalf("%s: no energy", c.Cell)
		}
		if !approx(e.MeasuredW, 2.5) || !approx(e.MeasuredJ, 2.5*c.WindowS) {
			t.Errorf("%s: measured %v J %v W, want 2.5 W over %v s", c.Cell, e.MeasuredJ, e.MeasuredW, c.WindowS)
		}
	}
	os.WriteFile(params, []byte(`{"wifi": {"tail_seconds": 1}}`), 0o644)
	if _, err := Generate(context.Background(), Options{Dir: dir, Out: t.TempDir(), EnergyParams: params}); err == nil || !strings.Contains(err.Error(), "tail_seconds") {
		t.Errorf("bad parameter file: err = %v", err)
	}
}

func itoa64(v int64) string { return strings.TrimSpace(fmtInt(v)) }

func TestManifestEnergyPerExperiment(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	s, _ := generate(t, dir, Options{NoFigures: true})
	if sat := s.EnergyModels["satellite"]; sat.BaseW != 25 || sat.IdleW != 12 || sat.TailS != 0.5 || s.CPUWatts[""] != 2 {
		t.Errorf("manifest energy not applied: %+v cpu %v", sat, s.CPUWatts)
	}
	// one experiment with another CPU power: the table is keyed per experiment
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	b = bytes.Replace(b, []byte(`"cpu_active_mw": 2000`), []byte(`"cpu_active_mw": 1500`), 1)
	os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644)
	s, out := generate(t, dir, Options{NoFigures: true})
	if s.CPUWatts["E1"] != 1.5 || s.CPUWatts["E4"] != 2 || s.EnergyModels["E4/wifi"].Name != "wifi" {
		t.Errorf("per-experiment energy: cpu %v, models %v", s.CPUWatts, sortedKeys(s.EnergyModels))
	}
	for _, c := range s.Cells {
		want := 1.5
		if c.Experiment != "E1" {
			want = 2
		}
		if c.Energy != nil && !approx(c.Energy.CPUJ, c.Energy.CPUSeconds*want) {
			t.Errorf("%s: CPU energy %v J for %v s, want %v W", c.Cell, c.Energy.CPUJ, c.Energy.CPUSeconds, want)
		}
	}
	md, _ := os.ReadFile(filepath.Join(out, FileMarkdown))
	if !bytes.Contains(md, []byte("| E1/processor |")) {
		t.Error("report.md lacks the per-experiment processor row")
	}
}

func TestFailedCellIsNoted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	p := filepath.Join(dir, "cells.csv")
	b, _ := os.ReadFile(p)
	lines := strings.Split(string(b), "\n")
	lines[1] = strings.Replace(lines[1], ",done,", ",failed,broker did not start,", 1)
	os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
	s, _ := generate(t, dir, Options{NoFigures: true})
	if !strings.Contains(strings.Join(s.Notes, "\n"), "status failed (broker did not start)") {
		t.Errorf("notes: %v", s.Notes)
	}
}

func TestFiguresPerVariant(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	p := filepath.Join(dir, "cells.csv")
	b, _ := os.ReadFile(p)
	// the cellular E1 cells become wifi cells with 500 B payloads
	re := regexp.MustCompile(`,cellular,([^,]*),([^,]*),([^,]*),periodic,100,`)
	b = re.ReplaceAll(b, []byte(",wifi,$1,$2,$3,periodic,500,"))
	os.WriteFile(p, b, 0o644)
	s, _ := generate(t, dir, Options{})
	names := map[string]bool{}
	for _, f := range s.Figures {
		names[f.Name] = true
	}
	for _, want := range []string{"delay-mean-wifi-E1-100B-every-1s", "delay-mean-wifi-E1-500B-every-1s", "completion-box-wifi", "xi-wifi"} {
		if !names[want] {
			t.Errorf("figure %s missing; have %v", want, sortedKeys(names))
		}
	}
}

func TestVariantSweepAtOneLoss(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	p := filepath.Join(dir, "cells.csv")
	b, _ := os.ReadFile(p)
	// E3a-like: the loss-0 cellular cells become ethernet cells with 500 B
	// payloads, the loss-0 wifi ones ethernet cells with 100 B; loss-5 cells
	// are dropped from cells.csv and so keep their own profile.
	re := regexp.MustCompile(`,(cellular),0,([^,]*),([^,]*),periodic,100,`)
	b = re.ReplaceAll(b, []byte(",ethernet,0,$2,$3,periodic,500,"))
	b = regexp.MustCompile(`,wifi,0,([^,]*),([^,]*),periodic,100,`).ReplaceAll(b, []byte(",ethernet,0,$1,$2,periodic,100,"))
	os.WriteFile(p, b, 0o644)
	s, _ := generate(t, dir, Options{})
	names := map[string]bool{}
	for _, f := range s.Figures {
		names[f.Name] = true
	}
	for _, want := range []string{"delay-variants-ethernet-E1", "power-variants-ethernet-E1", "cpu-variants-ethernet-E1", "pps-variants-ethernet-E1"} {
		if !names[want] {
			t.Errorf("figure %s missing; have %v", want, sortedKeys(names))
		}
	}
	for _, c := range s.Cells {
		if c.Profile == "ethernet" && (c.Energy == nil || c.Energy.Technology != "none" || c.Energy.Radio.TotalJ != 0) {
			t.Errorf("%s: a wired link has no radio energy: %+v", c.Cell, c.Energy)
		}
	}
}

func TestManifestPowerLog(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	b, _ := os.ReadFile(filepath.Join(dir, "manifest.json"))
	b = bytes.ReplaceAll(b, []byte(`"cpu_active_mw": 2000,`), []byte(`"cpu_active_mw": 2000, "power_log": "meter.csv",`))
	os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644)
	s, _ := generate(t, dir, Options{NoFigures: true})
	if !strings.Contains(strings.Join(s.Notes, "\n"), "power log meter.csv named in manifest.json is missing") {
		t.Errorf("notes: %v", s.Notes)
	}
	os.WriteFile(filepath.Join(dir, "meter.csv"), []byte(itoa64(fixT0)+",1\n"+itoa64(fixT0+4000_000_000_000)+",1\n"), 0o644)
	s, _ = generate(t, dir, Options{NoFigures: true})
	if s.PowerLog != "meter.csv" || s.Cells[0].Energy == nil || !approx(s.Cells[0].Energy.MeasuredW, 1) {
		t.Errorf("power log from the manifest not used: %q %+v", s.PowerLog, s.Cells[0].Energy)
	}
}

func TestIncompleteRepetitionIsLeftOutOfT(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	os.MkdirAll(dir, 0o755)
	writeFixture(t, dir)
	p := filepath.Join(dir, "completions.csv")
	b, _ := os.ReadFile(p)
	lines := strings.Split(string(b), "\n")
	lines[1] = strings.TrimSuffix(lines[1], ",10,10") + ",9,10" // first row: one message missing
	os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
	cell := strings.SplitN(lines[1], ",", 2)[0]
	s, _ := generate(t, dir, Options{NoFigures: true})
	for _, c := range s.Cells {
		if c.Cell == cell && (c.Incomplete != 1 || c.CompletionS.N != 4) {
			t.Errorf("%s: incomplete %d, n %d; want 1 and 4", c.Cell, c.Incomplete, c.CompletionS.N)
		}
	}
	for _, x := range s.Xi {
		if x.TCPCell == cell && x.Pairs != 4 {
			t.Errorf("xi pairs %d, want 4", x.Pairs)
		}
	}

	// A repetition whose publisher recorded nothing (stopped on a stall):
	// no times, nothing published; it did not complete either.
	f := strings.Split(lines[1], ",")
	lines[1] = strings.Join([]string{f[0], f[1], f[2], "", "", "", "0", "0"}, ",")
	os.WriteFile(p, []byte(strings.Join(lines, "\n")), 0o644)
	s, _ = generate(t, dir, Options{NoFigures: true})
	for _, c := range s.Cells {
		if c.Cell == cell && (c.Incomplete != 1 || c.CompletionS.N != 4) {
			t.Errorf("empty repetition: %s: incomplete %d, n %d; want 1 and 4", c.Cell, c.Incomplete, c.CompletionS.N)
		}
	}
}
