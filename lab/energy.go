package lab

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"github.com/iotq/iotq/link/profile"
	"github.com/iotq/iotq/records"
)

// RadioModel is a power-state model of one radio technology (Huang et al.,
// MobiSys 2012): promotion from idle, active transfer with a base power
// plus a per-Mbit/s cost up and down, a tail after the last packet, idle.
// Powers in watts, durations in seconds; the field names are those the
// report reads (report/energy.Model).
type RadioModel struct {
	PromotionW   float64 `yaml:"promotion_w" json:"promotion_w"`
	PromotionS   float64 `yaml:"promotion_s" json:"promotion_s"`
	BaseW        float64 `yaml:"base_w" json:"base_w"`
	UpWPerMbps   float64 `yaml:"up_w_per_mbps" json:"up_w_per_mbps"`
	DownWPerMbps float64 `yaml:"down_w_per_mbps" json:"down_w_per_mbps"`
	TailW        float64 `yaml:"tail_w" json:"tail_w"`
	TailS        float64 `yaml:"tail_s" json:"tail_s"`
	IdleW        float64 `yaml:"idle_w" json:"idle_w"`
	Source       string  `yaml:"source,omitempty" json:"source,omitempty"`
}

// EnergyModel holds the parameters of the energy estimate. Scenario files
// write watts and seconds; manifest.json (experiments[].energy) records
// milliwatts and milliseconds (records.Energy), as the report reads them.
// The report computes the estimate from the pcap, links.csv and cpu.csv.
type EnergyModel struct {
	// CPUActiveW is the processor's active power: CPU energy = CPU time x
	// this. Default 2 W.
	CPUActiveW float64 `yaml:"cpu_active_w,omitempty" json:"cpu_active_w"`
	// Radio maps a technology (wifi, lte, satellite) to its model; missing
	// ones take DefaultEnergy's.
	Radio map[string]RadioModel `yaml:"radio,omitempty" json:"radio"`
	// ProfileRadio maps a link profile to a technology. Default: the radios
	// of the profile table (link/profile: wifi->wifi, cellular->lte,
	// satellite->satellite); a profile without an entry (ethernet) has no
	// radio.
	ProfileRadio map[string]string `yaml:"profile_radio,omitempty" json:"profile_radio"`
	// PowerLog is an optional external power meter log (timestamped CSV)
	// that the report aligns with the run.
	PowerLog string `yaml:"power_log,omitempty" json:"power_log,omitempty"`
	// BoardBaseW is the publishing device's base power in the whole-device
	// model (base x window + CPU + radio), BoardSource where it comes
	// from. Default records.DefaultBoardBaseMW with its source.
	BoardBaseW  float64 `yaml:"board_base_w,omitempty" json:"board_base_w,omitempty"`
	BoardSource string  `yaml:"board_source,omitempty" json:"board_source,omitempty"`
}

// DefaultEnergy returns the default model: the radio models of
// records.DefaultRadios, the processor's records.DefaultCPUActiveMW and the
// radios of the profile table (link/profile).
func DefaultEnergy() EnergyModel {
	return energyFromRecord(records.Energy{CPUActiveMW: records.DefaultCPUActiveMW, Radio: records.DefaultRadios(),
		ProfileRadio: profile.Radios(), BoardBaseMW: records.DefaultBoardBaseMW, BoardSource: records.SourceBoardBase})
}

func (e EnergyModel) withDefaults() EnergyModel {
	def := DefaultEnergy()
	out := EnergyModel{CPUActiveW: e.CPUActiveW, PowerLog: e.PowerLog,
		Radio: map[string]RadioModel{}, ProfileRadio: map[string]string{}}
	if out.CPUActiveW == 0 {
		out.CPUActiveW = def.CPUActiveW
	}
	out.BoardBaseW, out.BoardSource = e.BoardBaseW, e.BoardSource
	switch {
	case out.BoardBaseW == 0:
		out.BoardBaseW, out.BoardSource = def.BoardBaseW, def.BoardSource
	case out.BoardSource == "":
		out.BoardSource = "scenario file"
	}
	for k, v := range def.Radio {
		out.Radio[k] = v
	}
	for k, v := range e.Radio {
		if v.Source == "" {
			v.Source = "scenario file"
		}
		out.Radio[k] = v
	}
	for k, v := range def.ProfileRadio {
		out.ProfileRadio[k] = v
	}
	for k, v := range e.ProfileRadio {
		out.ProfileRadio[k] = v
	}
	return out
}

func (e EnergyModel) validate() []error {
	var errs []error
	if e.CPUActiveW < 0 || math.IsNaN(e.CPUActiveW) {
		errs = append(errs, &FieldError{Path: "energy.cpu_active_w", Msg: "must not be negative"})
	}
	if e.BoardBaseW < 0 || math.IsNaN(e.BoardBaseW) || math.IsInf(e.BoardBaseW, 0) {
		errs = append(errs, &FieldError{Path: "energy.board_base_w", Msg: "must be finite and not negative"})
	}
	var keys []string
	for k := range e.Radio {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		r := e.Radio[k]
		for _, f := range []struct {
			name string
			v    float64
		}{{"promotion_w", r.PromotionW}, {"promotion_s", r.PromotionS}, {"base_w", r.BaseW},
			{"up_w_per_mbps", r.UpWPerMbps}, {"down_w_per_mbps", r.DownWPerMbps}, {"tail_w", r.TailW},
			{"tail_s", r.TailS}, {"idle_w", r.IdleW}} {
			if f.v < 0 || math.IsNaN(f.v) || math.IsInf(f.v, 0) {
				errs = append(errs, &FieldError{Path: fmt.Sprintf("energy.radio.%s.%s", k, f.name), Msg: "must be finite and not negative"})
			}
		}
	}
	var profs []string
	for p := range e.ProfileRadio {
		profs = append(profs, p)
	}
	sort.Strings(profs)
	for _, p := range profs {
		t := e.ProfileRadio[p]
		if _, ok := e.Radio[t]; !ok && t != "" {
			errs = append(errs, &FieldError{Path: "energy.profile_radio." + p, Msg: fmt.Sprintf("technology %q has no radio model: add it under energy.radio", t)})
		}
	}
	return errs
}

// record returns the model as the manifest records it (records.Energy:
// milliwatts and milliseconds).
func (e EnergyModel) record() *records.Energy {
	out := &records.Energy{CPUActiveMW: e.CPUActiveW * 1000, Radio: map[string]records.Radio{}, ProfileRadio: e.ProfileRadio, PowerLog: e.PowerLog,
		BoardBaseMW: e.BoardBaseW * 1000, BoardSource: e.BoardSource}
	for k, r := range e.Radio {
		out.Radio[k] = records.Radio{PromotionMW: r.PromotionW * 1000, PromotionMS: r.PromotionS * 1000, ActiveBaseMW: r.BaseW * 1000,
			UpMWPerMbps: r.UpWPerMbps * 1000, DownMWPerMbps: r.DownWPerMbps * 1000, TailMW: r.TailW * 1000, TailMS: r.TailS * 1000,
			IdleMW: r.IdleW * 1000, Source: r.Source}
	}
	return out
}

// energyFromRecord is the inverse of record.
func energyFromRecord(in records.Energy) EnergyModel {
	e := EnergyModel{CPUActiveW: in.CPUActiveMW / 1000, Radio: map[string]RadioModel{}, ProfileRadio: in.ProfileRadio, PowerLog: in.PowerLog,
		BoardBaseW: in.BoardBaseMW / 1000, BoardSource: in.BoardSource}
	for k, r := range in.Radio {
		e.Radio[k] = RadioModel{PromotionW: r.PromotionMW / 1000, PromotionS: r.PromotionMS / 1000, BaseW: r.ActiveBaseMW / 1000,
			UpWPerMbps: r.UpMWPerMbps / 1000, DownWPerMbps: r.DownMWPerMbps / 1000, TailW: r.TailMW / 1000, TailS: r.TailMS / 1000,
			IdleW: r.IdleMW / 1000, Source: r.Source}
	}
	return e
}

// MarshalJSON writes the model as the manifest does (records.Energy).
func (e EnergyModel) MarshalJSON() ([]byte, error) { return json.Marshal(e.record()) }

// UnmarshalJSON reads what MarshalJSON writes.
func (e *EnergyModel) UnmarshalJSON(b []byte) error {
	var in records.Energy
	if err := json.Unmarshal(b, &in); err != nil {
		return err
	}
	*e = energyFromRecord(in)
	return nil
}
