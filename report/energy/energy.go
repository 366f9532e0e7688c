package energy

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/iotq/iotq/records"
)

// Model is the power-state model of one radio technology. Powers are in
// watts, durations in seconds.
type Model struct {
	// Name is the technology ("wifi", "lte", "satellite").
	Name string `json:"name"`
	// PromotionW and PromotionS: power and duration of the idle -> active
	// promotion.
	PromotionW float64 `json:"promotion_w"`
	PromotionS float64 `json:"promotion_s"`
	// BaseW is the active-state power at zero throughput (beta).
	BaseW float64 `json:"base_w"`
	// UpWPerMbps and DownWPerMbps are alpha_u and alpha_d: watts per Mbit/s
	// of uplink and downlink throughput.
	UpWPerMbps   float64 `json:"up_w_per_mbps"`
	DownWPerMbps float64 `json:"down_w_per_mbps"`
	// TailW and TailS: power and duration of the tail after the last packet.
	TailW float64 `json:"tail_w"`
	TailS float64 `json:"tail_s"`
	// IdleW is the average idle power (DRX or beacon listening).
	IdleW float64 `json:"idle_w"`
	// Source says where the values come from.
	Source string `json:"source"`
}

// Validate reports negative or non-finite parameters.
func (m Model) Validate() error {
	vals := map[string]float64{"promotion_w": m.PromotionW, "promotion_s": m.PromotionS, "base_w": m.BaseW,
		"up_w_per_mbps": m.UpWPerMbps, "down_w_per_mbps": m.DownWPerMbps, "tail_w": m.TailW, "tail_s": m.TailS, "idle_w": m.IdleW}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var bad []string
	for _, k := range keys {
		if v := vals[k]; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			bad = append(bad, fmt.Sprintf("%s=%v", k, v))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("energy model %q: %s: parameters must be finite and not negative", m.Name, strings.Join(bad, ", "))
	}
	return nil
}

// Defaults returns the built-in models keyed by technology
// (records.DefaultRadios, in watts and seconds): "wifi" and "lte" from
// Huang et al. (MobiSys 2012); "satellite" is a placeholder with no
// published source that a user should replace with the terminal's data
// sheet values.
func Defaults() map[string]Model {
	out := map[string]Model{}
	for tech, r := range records.DefaultRadios() {
		out[tech] = FromRecord(tech, r)
	}
	return out
}

// FromRecord converts a radio model as the manifest records it (mW, ms).
func FromRecord(tech string, r records.Radio) Model {
	return Model{Name: tech, PromotionW: r.PromotionMW / 1000, PromotionS: r.PromotionMS / 1000,
		BaseW: r.ActiveBaseMW / 1000, UpWPerMbps: r.UpMWPerMbps / 1000, DownWPerMbps: r.DownMWPerMbps / 1000,
		TailW: r.TailMW / 1000, TailS: r.TailMS / 1000, IdleW: r.IdleMW / 1000, Source: r.Source}
}

// LoadModels reads a JSON object keyed by technology whose values override
// fields of the defaults, for example {"satellite": {"base_w": 25, "idle_w": 12}}.
// Fields not given keep their default; an unknown technology starts from zero.
func LoadModels(path string) (map[string]Model, error) {
	models := Defaults()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("energy parameters: %w", err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("energy parameters %s: want a JSON object keyed by technology (wifi, lte, satellite): %w", path, err)
	}
	for tech, msg := range raw {
		m := models[tech]
		m.Name = tech
		src := m.Source
		m.Source = ""
		dec := json.NewDecoder(strings.NewReader(string(msg)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			return nil, fmt.Errorf("energy parameters %s: technology %q: %w (fields: promotion_w, promotion_s, base_w, up_w_per_mbps, down_w_per_mbps, tail_w, tail_s, idle_w, source)", path, tech, err)
		}
		if m.Source == "" {
			m.Source = "user file " + "(overrides " + src + ")"
		}
		if err := m.Validate(); err != nil {
			return nil, fmt.Errorf("energy parameters %s: %w", path, err)
		}
		models[tech] = m
	}
	return models, nil
}

// Event is one packet on the node's link.
type Event struct {
	TimeNs int64
	Bytes  int
	Up     bool // sent by the node
}

// Breakdown is the radio energy of a window split by state.
type Breakdown struct {
	PromotionJ float64 `json:"promotion_j"`
	ActiveJ    float64 `json:"active_j"`
	TailJ      float64 `json:"tail_j"`
	IdleJ      float64 `json:"idle_j"`
	TotalJ     float64 `json:"total_j"`
	Promotions int     `json:"promotions"`
	ActiveS    float64 `json:"active_s"`
	WindowS    float64 `json:"window_s"`
}

// DefaultBinNs is the throughput window of the active state: 100 ms.
const DefaultBinNs = 100_000_000

// Radio runs the model over a packet timeline in the window [startNs, endNs]
// (widened to cover every event). Time is cut into bins of binNs (0 means
// DefaultBinNs); a bin with packets is active for its whole length at
// BaseW + UpWPerMbps*up + DownWPerMbps*down, with the throughputs measured in
// that bin. Between active bins the radio is in the tail for up to TailS,
// then idle; leaving idle (and the first activity) costs one promotion,
// whose duration is taken out of the idle time before it.
func (m Model) Radio(events []Event, startNs, endNs, binNs int64) Breakdown {
	if binNs <= 0 {
		binNs = DefaultBinNs
	}
	ev := slices.Clone(events)
	slices.SortStableFunc(ev, func(a, b Event) int {
		switch {
		case a.TimeNs < b.TimeNs:
			return -1
		case a.TimeNs > b.TimeNs:
			return 1
		}
		return 0
	})
	if len(ev) > 0 {
		startNs = min(startNs, ev[0].TimeNs)
		endNs = max(endNs, ev[len(ev)-1].TimeNs)
	}
	var out Breakdown
	if endNs <= startNs {
		return out
	}
	binS := float64(binNs) / 1e9
	type bin struct {
		idx      int64
		up, down int
	}
	var bins []bin
	for _, e := range ev {
		i := (e.TimeNs - startNs) / binNs
		if len(bins) == 0 || bins[len(bins)-1].idx != i {
			bins = append(bins, bin{idx: i})
		}
		if e.Up {
			bins[len(bins)-1].up += e.Bytes
		} else {
			bins[len(bins)-1].down += e.Bytes
		}
	}
	if len(bins) > 0 {
		endNs = max(endNs, startNs+(bins[len(bins)-1].idx+1)*binNs)
	}
	out.WindowS = float64(endNs-startNs) / 1e9
	prevEnd := startNs
	for k, b := range bins {
		bStart := startNs + b.idx*binNs
		g := float64(bStart-prevEnd) / 1e9
		tail, idle, promote := 0.0, g, true
		if k > 0 {
			tail = math.Min(g, m.TailS)
			idle = g - tail
			promote = g > m.TailS
		}
		if promote {
			out.Promotions++
			out.PromotionJ += m.PromotionW * m.PromotionS
			idle -= math.Min(idle, m.PromotionS) // the promotion replaces idle time
		}
		out.TailJ += tail * m.TailW
		out.IdleJ += idle * m.IdleW
		up := float64(b.up) * 8 / binS / 1e6
		down := float64(b.down) * 8 / binS / 1e6
		out.ActiveJ += (m.BaseW + m.UpWPerMbps*up + m.DownWPerMbps*down) * binS
		out.ActiveS += binS
		prevEnd = bStart + binNs
	}
	g := float64(endNs-prevEnd) / 1e9
	if len(bins) == 0 {
		out.IdleJ += g * m.IdleW
	} else {
		tail := math.Min(g, m.TailS)
		out.TailJ += tail * m.TailW
		out.IdleJ += (g - tail) * m.IdleW
	}
	out.TotalJ = out.PromotionJ + out.ActiveJ + out.TailJ + out.IdleJ
	return out
}

// Totals runs the model when only packet and byte totals are known: the
// radio is taken as active for the whole window at the average throughput
// (one promotion, one tail after the window). It overestimates for sparse
// traffic, which the report says next to the number.
func (m Model) Totals(upBytes, downBytes int64, windowS float64) Breakdown {
	var out Breakdown
	if windowS <= 0 {
		return out
	}
	up := float64(upBytes) * 8 / windowS / 1e6
	down := float64(downBytes) * 8 / windowS / 1e6
	out.Promotions = 1
	out.PromotionJ = m.PromotionW * m.PromotionS
	out.ActiveJ = (m.BaseW + m.UpWPerMbps*up + m.DownWPerMbps*down) * windowS
	out.TailJ = m.TailW * m.TailS
	out.ActiveS = windowS
	out.WindowS = windowS
	out.TotalJ = out.PromotionJ + out.ActiveJ + out.TailJ
	return out
}

// CPU returns the processor energy in joules: CPU time x active power.
func CPU(cpuNs int64, activeW float64) float64 { return float64(cpuNs) / 1e9 * activeW }
