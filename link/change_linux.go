package link

import (
	"fmt"
	"strings"
)

// Change applies s to the direction of link linkName whose sending end is
// node from, now (s.At is ignored): as a schedule step due at this
// instant, for changes whose moment the caller picks while the network
// runs (the lab's path change, E10: a fixed time into each repetition).
// Down, Loss, Delay and Rate act as in a Schedule; Rebind rebinds the NAT
// in front of from, which the direction must have (Params.NAT or a
// Rebind step in its schedule). Media have no per-direction model and are
// refused.
func (n *Network) Change(linkName, from string, s Step) error {
	var p *path
	var dirs []string
	for _, q := range n.paths {
		if q.link != linkName {
			continue
		}
		dirs = append(dirs, q.from)
		if q.from == from {
			p = q
		}
	}
	switch {
	case len(dirs) == 0:
		return fmt.Errorf("change link %s: no such link in this network", linkName)
	case p == nil:
		return fmt.Errorf("change link %s: no direction from %s (its ends: %s)", linkName, from, strings.Join(dirs, ", "))
	case p.dir == nil:
		return fmt.Errorf("change link %s: a shared medium has no per-direction parameters to change", linkName)
	case s.Rebind && p.natOut == nil:
		return fmt.Errorf("change link %s from %s: rebind needs a NAT in front of %s: build the link with Params.NAT (or a rebind step) in that direction", linkName, from, from)
	}
	if err := (Params{Schedule: []Step{s}}).Validate("change"); err != nil {
		return err
	}
	now := monoNow()
	if s.Rebind {
		p.natOut.rebindAt(now - p.natOut.start)
	}
	p.mu.Lock()
	p.dir.Apply(now, s)
	p.mu.Unlock()
	return nil
}
