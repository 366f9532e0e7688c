package link

import (
	"fmt"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// EndStats are the kernel's counters of one link end's TUN interface:
// what happened outside the model.
type EndStats struct {
	Node      string `json:"node"`
	Link      string `json:"link"`
	Interface string `json:"interface"`
	// TxDropped counts packets the node's kernel dropped because the TUN
	// queue was full (our reader fell behind): they never reached the
	// model. RxDropped counts packets we wrote that the kernel refused.
	TxDropped uint64 `json:"tx_dropped"`
	RxDropped uint64 `json:"rx_dropped"`
	TxPackets uint64 `json:"tx_packets"`
	RxPackets uint64 `json:"rx_packets"`
}

// EndStats reads the kernel counters of every link end's interface.
func (n *Network) EndStats() ([]EndStats, error) {
	if n.closed.Load() {
		return nil, ErrClosed
	}
	var out []EndStats
	for _, st := range n.order {
		if len(st.eps) == 0 {
			continue
		}
		var h *netlink.Handle
		var err error
		if st.host {
			h, err = netlink.NewHandle()
		} else {
			var ns netns.NsHandle
			ns, err = netns.GetFromName(st.ns)
			if err == nil {
				h, err = netlink.NewHandleAt(ns)
				ns.Close()
			}
		}
		if err != nil {
			return out, fmt.Errorf("node %q: netlink: %w", st.name, err)
		}
		for _, e := range st.eps {
			l, err := h.LinkByName(e.ifname)
			if err != nil {
				h.Close()
				return out, fmt.Errorf("node %q: interface %s: %w", st.name, e.ifname, err)
			}
			es := EndStats{Node: st.name, Link: e.owner, Interface: e.ifname}
			if s := l.Attrs().Statistics; s != nil {
				es.TxDropped, es.RxDropped = s.TxDropped, s.RxDropped
				es.TxPackets, es.RxPackets = s.TxPackets, s.RxPackets
			}
			out = append(out, es)
		}
		h.Close()
	}
	return out, nil
}
