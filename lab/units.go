package lab

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

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
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

// ParseDuration parses a non-negative duration such as "25ms".
func ParseDuration(s string) (Duration, error) {
	s = strings.TrimSpace(s)
	if s == "0" {
		return 0, nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q: want a Go duration such as 25ms or 1.5s", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("duration %q: must not be negative", s)
	}
	return Duration(v), nil
}

// Rate is a link rate in bits per second, written as tc writes it
// ("20mbit", "1.5mbit", "512kbit", "10gbit"). Zero means unlimited.
type Rate int64

// String formats the rate in the largest unit that keeps it readable.
func (r Rate) String() string {
	switch {
	case r == 0:
		return "0"
	case r%1_000_000_000 == 0:
		return fmt.Sprintf("%dgbit", r/1_000_000_000)
	case r >= 1_000_000:
		return strconv.FormatFloat(float64(r)/1e6, 'f', -1, 64) + "mbit"
	case r >= 1000:
		return strconv.FormatFloat(float64(r)/1e3, 'f', -1, 64) + "kbit"
	}
	return fmt.Sprintf("%dbit", int64(r))
}

// MarshalYAML writes the rate as a string.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// UnmarshalYAML reads "20mbit" and friends.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseRate(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*r = v
	return nil
}

// ParseRate parses a tc-style rate: a number followed by bit, kbit, mbit
// or gbit (also bps, kbps, mbps, gbps for bytes per second).
func ParseRate(s string) (Rate, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "0" {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   float64
	}{
		{"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
		{"gbps", 8e9}, {"mbps", 8e6}, {"kbps", 8e3}, {"bps", 8},
	}
	for _, u := range units {
		if num, ok := strings.CutSuffix(t, u.suffix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
				break
			}
			return Rate(math.Round(f * u.mult)), nil
		}
	}
	return 0, fmt.Errorf("rate %q: want a number and a unit as tc writes it, such as 20mbit, 1.5mbit or 512kbit", s)
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
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*p = v
	return nil
}

func parsePercentNumber(s string) (Percent, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "%")
	f, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("loss %q: want a percentage such as 5 or 5%%", s)
	}
	return Percent(f), nil
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
