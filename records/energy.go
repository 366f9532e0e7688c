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
