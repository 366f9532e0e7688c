package report

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotq/iotq/records"
)

// TestCPUAndWholeDeviceEnergy (E3a): the publisher's CPU time is reported
// on its own, and the whole-device model adds the board's base power over
// the window to the radio and CPU parts; the report states that the testbed
// measured the whole board with a meter and cites the base power's source.
func TestCPUAndWholeDeviceEnergy(t *testing.T) {
	dir := t.TempDir()
	writeFixture(t, dir)
	s, out := generate(t, dir, Options{NoFigures: true})
	base := records.DefaultBoardBaseMW / 1000
	n := 0
	for _, c := range s.Cells {
		e := c.Energy
		if e == nil || !finite(c.CPUSeconds) {
			continue
		}
		n++
		if c.CPUSeconds != e.CPUSeconds || !(c.CPUMsPerMessage > 0) {
			t.Errorf("%s: CPU %v s (%v ms/msg), energy's %v s", c.Cell, c.CPUSeconds, c.CPUMsPerMessage, e.CPUSeconds)
		}
		win := math.Max(e.Radio.WindowS, c.WindowS)
		if e.BaseW != base || math.Abs(e.BaseJ-base*win) > 1e-9 || math.Abs(e.DeviceJ-(e.BaseJ+e.Radio.TotalJ+e.CPUJ)) > 1e-9 || e.DeviceMeanW <= base {
			t.Errorf("%s: base %v W %v J, device %v J (%v W); radio %v J, CPU %v J, window %v s", c.Cell, e.BaseW, e.BaseJ, e.DeviceJ, e.DeviceMeanW, e.Radio.TotalJ, e.CPUJ, win)
		}
	}
	if n == 0 {
		t.Fatal("no cell with CPU time and energy in the fixture")
	}
	if b := s.BoardBase[""]; b.W != base || !strings.Contains(b.Source, "bare-board active current") {
		t.Errorf("board base %+v", s.BoardBase)
	}
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## CPU time of the publisher", "measured the whole board's power with a meter", "| board (base) |"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
}
