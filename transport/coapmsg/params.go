package coapmsg

import (
	"errors"
	"fmt"
	"time"
)

// Params are the transmission parameters of RFC 7252 section 4.8. The zero
// value of every field means the RFC's default.
type Params struct {
	// AckTimeout is ACK_TIMEOUT. Default 2s.
	AckTimeout time.Duration `yaml:"ack_timeout"`
	// AckRandomFactor is ACK_RANDOM_FACTOR (>= 1). Default 1.5.
	AckRandomFactor float64 `yaml:"ack_random_factor"`
	// MaxRetransmit is MAX_RETRANSMIT. Default 4; a negative value means 0
	// (no retransmission).
	MaxRetransmit int `yaml:"max_retransmit"`
	// NStart is NSTART, the number of outstanding confirmable messages per
	// peer. Default 1.
	NStart int `yaml:"nstart"`
	// ExchangeLifetime is how long a received CON message ID is remembered
	// for deduplication. Default: derived from the other parameters as in
	// RFC 7252 section 4.8.2 (247 s with the defaults).
	ExchangeLifetime time.Duration `yaml:"exchange_lifetime"`
	// NonLifetime is how long a received NON message ID is remembered.
	// Default: derived (145 s with the defaults).
	NonLifetime time.Duration `yaml:"non_lifetime"`
	// MaxLatency is MAX_LATENCY, used in the derived lifetimes. Default 100s.
	MaxLatency time.Duration `yaml:"max_latency"`
	// CoCoA switches on CoCoA congestion control (draft-ietf-core-cocoa-03)
	// instead of the fixed initial timeout of RFC 7252.
	CoCoA bool `yaml:"cocoa"`
}

// WithDefaults returns p with every zero field set to its default.
func (p Params) WithDefaults() Params {
	if p.AckTimeout == 0 {
		p.AckTimeout = 2 * time.Second
	}
	if p.AckRandomFactor == 0 {
		p.AckRandomFactor = 1.5
	}
	if p.MaxRetransmit == 0 {
		p.MaxRetransmit = 4
	} else if p.MaxRetransmit < 0 {
		p.MaxRetransmit = 0
	}
	if p.NStart == 0 {
		p.NStart = 1
	}
	if p.MaxLatency == 0 {
		p.MaxLatency = 100 * time.Second
	}
	span := p.MaxTransmitSpan()
	if p.ExchangeLifetime == 0 {
		// MAX_TRANSMIT_SPAN + 2*MAX_LATENCY + PROCESSING_DELAY, where
		// PROCESSING_DELAY = ACK_TIMEOUT.
		p.ExchangeLifetime = span + 2*p.MaxLatency + p.AckTimeout
	}
	if p.NonLifetime == 0 {
		p.NonLifetime = span + p.MaxLatency
	}
	return p
}

// MaxTransmitSpan is MAX_TRANSMIT_SPAN: ACK_TIMEOUT * (2^MAX_RETRANSMIT - 1)
// * ACK_RANDOM_FACTOR (45 s with the defaults).
func (p Params) MaxTransmitSpan() time.Duration {
	return time.Duration(float64(p.AckTimeout) * float64(int(1)<<p.MaxRetransmit-1) * p.AckRandomFactor)
}

// MaxTransmitWait is MAX_TRANSMIT_WAIT: ACK_TIMEOUT * (2^(MAX_RETRANSMIT+1)
// - 1) * ACK_RANDOM_FACTOR (93 s with the defaults), the longest a
// confirmable message can wait for its acknowledgement.
func (p Params) MaxTransmitWait() time.Duration {
	return time.Duration(float64(p.AckTimeout) * float64(int(1)<<(p.MaxRetransmit+1)-1) * p.AckRandomFactor)
}

// Validate reports every bad field at once.
func (p Params) Validate() error {
	var errs []error
	if p.AckTimeout < 0 {
		errs = append(errs, fmt.Errorf("ack_timeout %s: must be positive (RFC 7252 default 2s)", p.AckTimeout))
	}
	if p.AckRandomFactor != 0 && p.AckRandomFactor < 1 {
		errs = append(errs, fmt.Errorf("ack_random_factor %g: must be at least 1 (RFC 7252 default 1.5)", p.AckRandomFactor))
	}
	if p.MaxRetransmit > 20 {
		errs = append(errs, fmt.Errorf("max_retransmit %d: at most 20 (RFC 7252 default 4)", p.MaxRetransmit))
	}
	if p.NStart < 0 {
		errs = append(errs, fmt.Errorf("nstart %d: must be at least 1 (RFC 7252 default 1)", p.NStart))
	}
	if p.ExchangeLifetime < 0 || p.NonLifetime < 0 || p.MaxLatency < 0 {
		errs = append(errs, errors.New("exchange_lifetime, non_lifetime and max_latency must not be negative"))
	}
	return errors.Join(errs...)
}
