package lab

import (
	"fmt"
	"slices"
	"time"

	"github.com/iotq/iotq/records"
)

// Path changes of pattern path-change (Spec.PathChanges, E10).
const (
	PathChangeRebind         = records.PathChangeRebind
	PathChangeWifiToCellular = records.PathChangeWifiToCellular
)

// pathChangeDefaults fills PathChanges and ChangeAt for a spec with pattern
// path-change: [rebind], and half the stream.
func (s Spec) pathChangeDefaults() Spec {
	if !slices.Contains(s.Patterns, PatternPathChange) {
		return s
	}
	if len(s.PathChanges) == 0 {
		s.PathChanges = []string{PathChangeRebind}
	}
	if s.ChangeAt == 0 && s.Messages > 0 && len(s.Intervals) > 0 {
		s.ChangeAt = Duration(time.Duration(s.Messages) * s.Intervals[0].D() / 2)
	}
	return s
}

// pathChangesOf is the path changes pattern pat sweeps: the spec's for
// path-change, none ("") for the others.
func (s Spec) pathChangesOf(pat string) []string {
	if pat == PatternPathChange {
		return s.PathChanges
	}
	return []string{""}
}

// setPathChange makes c a cell of path change change ("" for none).
func (s Spec) setPathChange(c *Cell, change string) {
	if change == "" {
		return
	}
	c.PathChange, c.ChangeAtNs = change, int64(s.ChangeAt)
	if change == PathChangeWifiToCellular {
		to, _ := s.linkOf("cellular")
		to.LossPct, to.QueueBytes = c.PubLink.LossPct, c.PubLink.QueueBytes
		c.ChangeLink = &to
	}
}

// validatePathChange reports the problems of the path-change fields of s
// (d: s with defaults).
func (s Spec) validatePathChange(d Spec, bad func(path, format string, args ...any)) {
	if !slices.Contains(d.Patterns, PatternPathChange) {
		if len(s.PathChanges) > 0 {
			bad("path_changes", "only for pattern path-change (E10); add it to patterns or leave path_changes out")
		}
		if s.ChangeAt != 0 {
			bad("change_at", "only for pattern path-change (E10); add it to patterns or leave change_at out")
		}
		return
	}
	for i, pc := range d.PathChanges {
		switch pc {
		case PathChangeRebind:
		case PathChangeWifiToCellular:
			for _, prof := range d.Profiles {
				if prof != "wifi" {
					bad(fmt.Sprintf("path_changes[%d]", i), "%s starts on the wifi profile, not %s: set profiles: [wifi] (or sweep rebind only)", pc, prof)
					break
				}
			}
			if _, ok := d.linkOf("cellular"); !ok {
				bad(fmt.Sprintf("path_changes[%d]", i), "%s needs the cellular profile", pc)
			}
		default:
			bad(fmt.Sprintf("path_changes[%d]", i), "%q: want rebind (the publisher's NAT gives it a new port) or wifi-to-cellular (the link switches to the cellular profile and the NAT rebinds)", pc)
		}
	}
	dupCheck(d.PathChanges, "path_changes", bad)
	for _, q := range d.QoS {
		if q != 1 {
			bad("qos", "pattern path-change counts lost and duplicated QoS 1 messages: set qos: [1]")
			break
		}
	}
	for i, t := range d.Transports {
		if ProtocolOf(t) != records.ProtocolMQTT {
			bad(fmt.Sprintf("transports[%d]", i), "%s with pattern path-change: the reconnecting publisher (iotq pub --reconnect) is MQTT's; use mqtts, quic, mqtt, ws or wss", t)
		}
	}
	if d.Topology.Kind != KindPubBrokerSub {
		bad("topology.kind", "pattern path-change changes the publisher's own link: use pub-broker-sub")
	}
	if !slices.Equal(d.Topology.Directions, []string{DirectionBoth}) {
		bad("topology.directions", "pattern path-change changes both directions of the publisher's link: leave directions out (both)")
	}
	for _, b := range d.LossBursts {
		if b != 0 {
			bad("loss_bursts", "pattern path-change restores the publisher's link after a change with independent loss: leave loss_bursts out")
			break
		}
	}
	if len(d.Patterns) > 1 {
		bad("patterns", "path-change needs an experiment of its own (its cells sweep path_changes): list it alone")
	}
	stream := func(msgs int) time.Duration {
		if len(d.Intervals) == 0 {
			return 0
		}
		return time.Duration(msgs) * d.Intervals[0].D()
	}
	if len(d.Intervals) > 1 {
		bad("intervals", "pattern path-change takes one interval (change_at is a time into its stream)")
	}
	if d.ChangeAt <= 0 {
		bad("change_at", "must be positive, for example 30s")
	} else if st := stream(d.Messages); d.ChangeAt.D() >= st {
		bad("change_at", "%s is not inside the stream of %d messages (%s): change the path before its end", d.ChangeAt.D(), d.Messages, st)
	}
	for name, sc := range s.Scales {
		if sc.Messages > 0 && d.ChangeAt > 0 && d.ChangeAt.D() >= stream(sc.Messages) {
			bad("scales."+name+".messages", "%d messages (%s) end before change_at %s: keep the stream longer than the change", sc.Messages, stream(sc.Messages), d.ChangeAt.D())
		}
	}
}
