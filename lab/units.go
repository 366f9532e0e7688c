package lab

import (
	"fmt"
	"strconv"
	"time"

	"github.com/iotq/iotq/internal/yamlconf"
	"github.com/iotq/iotq/link/profile"
	"go.yaml.in/yaml/v3"
)

// Duration is a time.Duration written as Go writes it ("25ms", "1.5s") in
// scenario files.
type Duration time.Duration

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats the duration as Go does.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// UnmarshalYAML reads "25ms", "1.5s"; a bare 0 means zero.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(n.Value)
	if err != nil {
		return yamlconf.ValueError(n, err)
	}
	*d = v
	return nil
}

// ParseDuration parses a non-negative duration such as "25ms"
// (profile.ParseDuration).
func ParseDuration(s string) (Duration, error) {
	d, err := profile.ParseDuration("duration", s)
	return Duration(d), err
}

// Rate is a link rate in bits per second, written as tc writes it
// ("20mbit", "1.5mbit", "512kbit", "10gbit"). Zero means unlimited.
type Rate int64

// String formats the rate as tc writes it ("20mbit"; "0" for unlimited).
func (r Rate) String() string {
	if r == 0 {
		return "0"
	}
	return profile.FormatRate(int64(r))
}

// MarshalYAML writes the rate as a string.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// UnmarshalYAML reads "20mbit" and friends.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseRate(n.Value)
	if err != nil {
		return yamlconf.ValueError(n, err)
	}
	*r = v
	return nil
}

// ParseRate parses a tc-style rate such as 20mbit, 1.5mbit or 512kbit
// (profile.ParseRate; mbps is megabytes per second, as in tc).
func ParseRate(s string) (Rate, error) {
	r, err := profile.ParseRate(s)
	return Rate(r), err
}

// Percent is a loss figure in percent (5 means 5 %). Scenario files may
// write 5, 5.0 or "5%".
type Percent float64

// Fraction returns the value as a probability (0.05 for 5 %).
func (p Percent) Fraction() float64 { return float64(p) / 100 }

// String formats the value without a trailing % ("5", "0.5").
func (p Percent) String() string { return strconv.FormatFloat(float64(p), 'f', -1, 64) }

// MarshalYAML writes the number.
func (p Percent) MarshalYAML() (any, error) { return float64(p), nil }

// UnmarshalYAML reads 5, 5.0 or "5%"; the range is checked by Validate,
// which names the field.
func (p *Percent) UnmarshalYAML(n *yaml.Node) error {
	v, err := parsePercentNumber(n.Value)
	if err != nil {
		return yamlconf.ValueError(n, err)
	}
	*p = v
	return nil
}

func parsePercentNumber(s string) (Percent, error) {
	v, err := profile.ParsePercent(s)
	return Percent(v), err
}

// ParsePercent parses "5", "5%" or "0.5%" into a percentage in [0, 100].
func ParsePercent(s string) (Percent, error) {
	p, err := parsePercentNumber(s)
	if err != nil {
		return 0, err
	}
	if f := float64(p); f < 0 || f > 100 {
		return 0, fmt.Errorf("loss %q: must lie between 0 and 100 percent", s)
	}
	return p, nil
}
