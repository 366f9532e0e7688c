package report

import (
	"encoding/json"
	"os"
	"reflect"

	"github.com/iotq/iotq/records"
	"github.com/iotq/iotq/report/energy"
)

// expEnergy is the energy configuration of one experiment.
type expEnergy struct {
	models      map[string]energy.Model
	profileTech map[string]string
	cpuW        float64
	// baseW is the device's base power (whole-device model), baseSource
	// where it comes from.
	baseW      float64
	baseSource string
}

// energyConfig holds the energy configuration per experiment; the entry ""
// applies to experiments the manifest does not describe.
type energyConfig struct {
	byExp map[string]expEnergy
}

func (ec *energyConfig) forExp(exp string) expEnergy {
	if e, ok := ec.byExp[exp]; ok {
		return e
	}
	return ec.byExp[""]
}

// applyEnergy returns base with the manifest's energy record (in mW and
// ms) applied.
func applyEnergy(base expEnergy, le *records.Energy) expEnergy {
	out := expEnergy{models: map[string]energy.Model{}, profileTech: map[string]string{}, cpuW: base.cpuW, baseW: base.baseW, baseSource: base.baseSource}
	if le.BoardBaseMW > 0 {
		out.baseW, out.baseSource = le.BoardBaseMW/1000, "manifest.json (lab's energy parameters)"
		if le.BoardSource != "" {
			out.baseSource = le.BoardSource
		}
	}
	for k, v := range base.models {
		out.models[k] = v
	}
	for k, v := range base.profileTech {
		out.profileTech[k] = v
	}
	if le.CPUActiveMW > 0 {
		out.cpuW = le.CPUActiveMW / 1000
	}
	for tech, r := range le.Radio {
		m := energy.FromRecord(tech, r)
		m.Source = "manifest.json (lab's energy parameters)"
		if m.Validate() == nil {
			out.models[tech] = m
		}
	}
	for p, tech := range le.ProfileRadio {
		out.profileTech[p] = tech
	}
	return out
}

// energyModels resolves the energy configuration: built-in defaults, then
// the manifest's records (top-level "energy", then each experiment's), then
// the user's parameter file and CPU power, which win everywhere.
func energyModels(ds *dataset, paramsFile string, cpuW float64) (*energyConfig, error) {
	base := expEnergy{models: energy.Defaults(), profileTech: map[string]string{}, cpuW: 2,
		baseW: records.DefaultBoardBaseMW / 1000, baseSource: records.SourceBoardBase}
	if e := ds.man.Energy; e != nil {
		base = applyEnergy(base, e)
	}
	ec := &energyConfig{byExp: map[string]expEnergy{"": base}}
	for _, x := range ds.man.Experiments {
		if x.Name != "" && x.Energy != nil {
			ec.byExp[x.Name] = applyEnergy(base, x.Energy)
		}
	}
	var user map[string]energy.Model
	var userKeys map[string]json.RawMessage
	if paramsFile != "" {
		var err error
		user, err = energy.LoadModels(paramsFile)
		if err != nil {
			return nil, err
		}
		raw, _ := os.ReadFile(paramsFile)
		_ = json.Unmarshal(raw, &userKeys)
	}
	for k, e := range ec.byExp {
		for tech := range userKeys {
			e.models[tech] = user[tech]
		}
		if cpuW > 0 {
			e.cpuW = cpuW
		}
		ec.byExp[k] = e
	}
	return ec, nil
}

// boardBase returns the base power of the whole-device model per key, the
// keys as table gives them ("" when every experiment shares it).
func (ec *energyConfig) boardBase(exps []string) map[string]BoardBase {
	out := map[string]BoardBase{}
	for _, x := range exps {
		e := ec.forExp(x)
		out[x] = BoardBase{W: e.baseW, Source: e.baseSource}
	}
	if len(out) == 0 {
		e := ec.byExp[""]
		return map[string]BoardBase{"": {W: e.baseW, Source: e.baseSource}}
	}
	var first *BoardBase
	for _, k := range sortedKeys(out) {
		b := out[k]
		if first == nil {
			first = &b
		} else if b != *first {
			return out
		}
	}
	return map[string]BoardBase{"": *first}
}

// table returns the models to print: keyed by technology when every
// experiment uses the same parameters, else by "EXPERIMENT/technology";
// and the CPU power per key prefix ("" or the experiment).
func (ec *energyConfig) table(exps []string) (map[string]energy.Model, map[string]float64) {
	used := map[string]expEnergy{}
	for _, x := range exps {
		used[x] = ec.forExp(x)
	}
	if len(used) == 0 {
		used[""] = ec.byExp[""]
	}
	var first *expEnergy
	uniform := true
	for _, k := range sortedKeys(used) {
		e := used[k]
		if first == nil {
			first = &e
			continue
		}
		if !reflect.DeepEqual(first.models, e.models) || first.cpuW != e.cpuW || first.baseW != e.baseW || first.baseSource != e.baseSource {
			uniform = false
		}
	}
	models := map[string]energy.Model{}
	cpu := map[string]float64{}
	if uniform {
		for k, m := range first.models {
			models[k] = m
		}
		cpu[""] = first.cpuW
		return models, cpu
	}
	for x, e := range used {
		for k, m := range e.models {
			models[x+"/"+k] = m
		}
		cpu[x] = e.cpuW
	}
	return models, cpu
}
