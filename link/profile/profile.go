package profile

import (
	"fmt"
	"strings"
	"time"
)

// Profile is a named link technology of experiments.md: a rate and a delay
// figure. Whether the figure is one-way or a round trip is the scenario's
// choice (its delay convention); PerDirection resolves it.
type Profile struct {
	Name  string
	Rate  int64         // bit/s, 0 = unlimited
	Delay time.Duration // the table's delay figure
	// Radio is the radio technology whose energy model the report applies
	// to a device on this link (wifi, lte, satellite); "" for a wired link.
	Radio string
}

// PerDirection returns the one-way delay of each direction: the figure
// itself, or half of it when the figure is a round trip (rtt).
func (p Profile) PerDirection(rtt bool) time.Duration {
	if rtt {
		return p.Delay / 2
	}
	return p.Delay
}

// All returns the built-in profiles, in the order of experiments.md.
func All() []Profile {
	return []Profile{
		{Name: "wifi", Rate: 20_000_000, Delay: 25 * time.Millisecond, Radio: "wifi"},
		{Name: "cellular", Rate: 10_000_000, Delay: 100 * time.Millisecond, Radio: "lte"},
		{Name: "satellite", Rate: 1_500_000, Delay: 600 * time.Millisecond, Radio: "satellite"},
		{Name: "ethernet", Rate: 100_000_000, Delay: 0},
	}
}

// Names lists the built-in profiles' names, in the order of All.
func Names() []string {
	var out []string
	for _, p := range All() {
		out = append(out, p.Name)
	}
	return out
}

// ByName returns the built-in profile called name (any case).
func ByName(name string) (Profile, error) {
	for _, p := range All() {
		if strings.EqualFold(p.Name, name) {
			return p, nil
		}
	}
	return Profile{}, fmt.Errorf("profile %q is unknown: use one of %s", name, strings.Join(Names(), ", "))
}

// Radios maps each built-in profile with a radio to its technology.
func Radios() map[string]string {
	out := map[string]string{}
	for _, p := range All() {
		if p.Radio != "" {
			out[p.Name] = p.Radio
		}
	}
	return out
}

// Rank is the position of a built-in profile in All (len(All()) for
// another name), for sorting tables and figures.
func Rank(name string) int {
	all := All()
	for i, p := range all {
		if p.Name == name {
			return i
		}
	}
	return len(all)
}
