package profile

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// number parses a finite float.
func number(s string) (float64, bool) {
	v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	return v, err == nil && !math.IsNaN(v) && !math.IsInf(v, 0)
}

// ParseRate parses a rate the way tc writes it: "20mbit", "1.5mbit",
// "512kbit", "1gbit", "9600bit" or a bare number of bit/s. "kbps"/"mbps"
// mean bytes per second, as in tc. The result is in bit/s.
func ParseRate(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("rate is empty: give a rate such as 20mbit, 1.5mbit or 512kbit")
	}
	units := []struct {
		suffix string
		mult   float64
	}{
		{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1},
		{"tbps", 8e12}, {"gbps", 8e9}, {"mbps", 8e6}, {"kbps", 8e3}, {"bps", 8},
	}
	mult, num := 1.0, t
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			mult, num = u.mult, strings.TrimSuffix(t, u.suffix)
			break
		}
	}
	v, ok := number(num)
	if !ok {
		return 0, fmt.Errorf("rate %q is not understood: give a rate such as 20mbit, 1.5mbit or 512kbit", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("rate %q is negative: give a rate such as 20mbit, or 0 for unlimited", s)
	}
	r := v * mult
	if r > math.MaxInt64/2 {
		return 0, fmt.Errorf("rate %q is too large", s)
	}
	return int64(math.Round(r)), nil
}

// FormatRate writes a rate in bit/s in tc's words (20mbit, 1.5mbit, 512kbit).
func FormatRate(bps int64) string {
	switch {
	case bps >= 1e9 && bps%1e7 == 0:
		return strconv.FormatFloat(float64(bps)/1e9, 'f', -1, 64) + "gbit"
	case bps >= 1e6 && bps%1e4 == 0:
		return strconv.FormatFloat(float64(bps)/1e6, 'f', -1, 64) + "mbit"
	case bps >= 1e3 && bps%10 == 0:
		return strconv.FormatFloat(float64(bps)/1e3, 'f', -1, 64) + "kbit"
	default:
		return strconv.FormatInt(bps, 10) + "bit"
	}
}

// ParseLoss parses a loss rate given as a percentage ("5%", "0.5%") and
// returns a probability in 0..1. A bare number ("0.05") is read as a
// probability; "0" means no loss.
func ParseLoss(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("loss is empty: give a percentage such as 5%%")
	}
	num, pct := strings.CutSuffix(t, "%")
	v, ok := number(num)
	if !ok {
		return 0, fmt.Errorf("loss %q is not understood: give a percentage such as 5%% (one %% sign)", s)
	}
	if pct {
		v /= 100
	} else if v > 1 {
		return 0, fmt.Errorf("loss %q is ambiguous: write a percentage with a %% sign (for example %s%%)", s, num)
	}
	if v < 0 || v > 1 {
		return 0, fmt.Errorf("loss %q is outside 0%%..100%%", s)
	}
	return v, nil
}

// ParsePercent parses a number of percent with or without a % sign
// ("5", "5%", "0.5"), the way scenario files write losses. The range is
// the caller's to check.
func ParsePercent(s string) (float64, error) {
	v, ok := number(strings.TrimSuffix(strings.TrimSpace(s), "%"))
	if !ok {
		return 0, fmt.Errorf("loss %q: want a percentage such as 5 or 5%%", s)
	}
	return v, nil
}

// FormatLoss writes a probability as a percentage ("5%").
func FormatLoss(p float64) string {
	return strconv.FormatFloat(p*100, 'f', -1, 64) + "%"
}

// ParseDuration parses a Go duration ("25ms", "1.5s"; "0") and refuses
// negative values; what names the quantity in the error.
func ParseDuration(what, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a duration: write it as Go does, for example 25ms or 1.5s", what, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s %q is negative: give 0 or a positive duration such as 25ms", what, s)
	}
	return d, nil
}

// ParseBytes parses a size in bytes: "125000", "64k" or "64kb" (KiB),
// "1m"/"1mb" (MiB).
func ParseBytes(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, u := range []struct {
		suf string
		m   int
	}{{"kb", 1 << 10}, {"k", 1 << 10}, {"mb", 1 << 20}, {"m", 1 << 20}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSuffix(t, u.suf), u.m
			break
		}
	}
	v, ok := number(t)
	if !ok || v < 0 || v*float64(mult) > 1<<40 {
		return 0, fmt.Errorf("size %q is not understood: give bytes such as 125000, 64kb or 1mb", s)
	}
	return int(v * float64(mult)), nil
}
