package coapmsg

import "time"

// Clock is the time source of an Endpoint; tests inject a fake one.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d (as time.AfterFunc).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a timer started by Clock.AfterFunc.
type Timer interface {
	// Stop prevents the timer from firing; false if it already fired or
	// was stopped.
	Stop() bool
}

// systemClock is the real clock.
type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }
func (systemClock) AfterFunc(d time.Duration, f func()) Timer {
	return time.AfterFunc(d, f)
}
