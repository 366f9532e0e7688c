package records

// Energy is how manifest.json records the energy parameters of an
// experiment (experiments[].energy): milliwatts and milliseconds. The lab
// writes it from the scenario (which speaks watts and seconds); the report
// reads it.
type Energy struct {
	// CPUActiveMW is the processor's active power.
	CPUActiveMW float64 `json:"cpu_active_mw"`
	// Radio maps a technology (wifi, lte, satellite) to its model.
	Radio map[string]Radio `json:"radio"`
	// ProfileRadio maps a link profile to a technology.
	ProfileRadio map[string]string `json:"profile_radio"`
	// PowerLog names an external power meter log (relative to DIR).
	PowerLog string `json:"power_log,omitempty"`
	// BoardBaseMW is the device's base power (the board without the
	// publisher's CPU work and radio) of the whole-device model; 0 means
	// DefaultBoardBaseMW. BoardSource says where it comes from.
	BoardBaseMW float64 `json:"board_base_mw,omitempty"`
	BoardSource string  `json:"board_source,omitempty"`
}

// Radio is a power-state model of one radio technology (Huang et al.,
// MobiSys 2012): promotion from idle, active transfer with a base power
// plus a per-Mbit/s cost up and down, a tail after the last packet, idle.
type Radio struct {
	PromotionMW   float64 `json:"promotion_mw"`
	PromotionMS   float64 `json:"promotion_ms"`
	ActiveBaseMW  float64 `json:"active_base_mw"`
	UpMWPerMbps   float64 `json:"up_mw_per_mbps"`
	DownMWPerMbps float64 `json:"down_mw_per_mbps"`
	TailMW        float64 `json:"tail_mw"`
	TailMS        float64 `json:"tail_ms"`
	IdleMW        float64 `json:"idle_mw"`
	Source        string  `json:"source,omitempty"`
}

// Sources of the default radio models, as the manifest and the report's
// parameter table show them. Each says where every figure comes from and
// what has been checked (docs/experiments.md, "Energy model parameters").
const (
	// SourceHuang is the paper the WiFi and LTE models come from.
	SourceHuang = "Huang et al., \"A Close Examination of Performance and Power Characteristics of 4G LTE Networks\", MobiSys 2012"
	// SourceHuangLTE and SourceHuangWiFi cite the tables per parameter.
	SourceHuangLTE = SourceHuang + ": promotion, tail and DRX figures from Table 3 (LTE column), beta/alpha_up/alpha_down from Table 4 (LTE row); " +
		"idle = DRX on-power x on-duration / paging cycle (our derivation). ASSUMPTION: values transcribed, not re-checked against the paper's tables (page numbers not verified)"
	SourceHuangWiFi = SourceHuang + ": promotion, tail and beacon figures from Table 3 (WiFi column), beta/alpha_up/alpha_down from Table 4 (WiFi row); " +
		"idle = beacon power x on-time / beacon period (our derivation). ASSUMPTION: values transcribed, not re-checked against the paper's tables (page numbers not verified)"
	SourceSatellite = "ASSUMPTION: placeholder, no published source (no terminal data sheet with these states was available); set the terminal's values (scenario energy.radio.satellite, or iotq report --energy-params)"
)

// DefaultCPUActiveMW is the default active power of the processor.
const DefaultCPUActiveMW = 2000

// DefaultBoardBaseMW is the default base power of the publishing device in
// the whole-device model (base + CPU time x active power + radio states):
// a Raspberry Pi 3 Model B+'s typical bare-board active current, 500 mA,
// at the 5.1 V supply (SourceBoardBase).
const DefaultBoardBaseMW = 500 * 5.1

// SourceBoardBase cites DefaultBoardBaseMW.
const SourceBoardBase = "Raspberry Pi documentation (raspberrypi.com, Computers, Raspberry Pi hardware, Power supply): typical bare-board active current " +
	"consumption of a Raspberry Pi 3 Model B+ 500 mA, at the 5.1 V supply all models require. ASSUMPTION: the testbed's board model is not " +
	"recorded here (a Pi 4 Model B lists 600 mA, a Pi 3 Model B 400 mA); a typical active draw, not an idle measurement, so it may count " +
	"some CPU work twice"

// DefaultRadios returns the default radio models by technology: WiFi and
// LTE from Huang et al., "A close examination of performance and power
// characteristics of 4G LTE networks", MobiSys 2012 (idle = DRX or beacon
// power x on time / period); the satellite terminal values are placeholders
// to replace with the terminal's data sheet. The lab records them in the
// manifest and the report falls back on them.
func DefaultRadios() map[string]Radio {
	return map[string]Radio{
		"wifi": {PromotionMW: 124.4, PromotionMS: 79.1, ActiveBaseMW: 132.86, UpMWPerMbps: 283.17,
			DownMWPerMbps: 137.01, TailMW: 119.3, TailMS: 238.1, IdleMW: 77.2 * 7.6 / 308.2, Source: SourceHuangWiFi},
		"lte": {PromotionMW: 1210.7, PromotionMS: 260.1, ActiveBaseMW: 1288.04, UpMWPerMbps: 438.39,
			DownMWPerMbps: 51.97, TailMW: 1060, TailMS: 11576, IdleMW: 594.3 * 43.2 / 1280.2, Source: SourceHuangLTE},
		"satellite": {ActiveBaseMW: 30000, UpMWPerMbps: 2000, DownMWPerMbps: 500, TailMW: 30000, TailMS: 1000,
			IdleMW: 20000, Source: SourceSatellite},
	}
}
