// Per-namespace sysctls: TCP congestion control.

package link

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
)

var ccRE = regexp.MustCompile(`^[a-z0-9_]{1,16}$`)

// SetCongestionControl sets net.ipv4.tcp_congestion_control in node's
// namespace (for example "cubic"). The host node is refused: changing it
// would change the whole machine.
func (n *Network) SetCongestionControl(node, cc string) error {
	st, err := n.node(node)
	if err != nil {
		return err
	}
	if st.host {
		return fmt.Errorf("node %q is the host namespace: set its congestion control with sysctl yourself", node)
	}
	if !ccRE.MatchString(cc) {
		return fmt.Errorf("congestion control %q: use a name such as cubic, bbr or reno", cc)
	}
	const knob = "/proc/sys/net/ipv4/tcp_congestion_control"
	write := func() error {
		return doInNamespace(st.ns, func() error { return os.WriteFile(knob, []byte(cc), 0o644) })
	}
	err = write()
	if errors.Is(err, os.ErrPermission) {
		// Outside the host namespace only the algorithms listed in
		// net.ipv4.tcp_allowed_congestion_control may be chosen.
		if aerr := allowCongestionControl(cc); aerr == nil {
			n.log.Info("added to net.ipv4.tcp_allowed_congestion_control so namespaces may use it", "cc", cc)
			err = write()
		}
	}
	if err != nil {
		avail, _ := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
		return fmt.Errorf("node %q: congestion control %q cannot be set (available: %s): %w",
			node, cc, strings.TrimSpace(string(avail)), err)
	}
	return nil
}

// allowCongestionControl adds cc to the host's
// net.ipv4.tcp_allowed_congestion_control (it must be available).
func allowCongestionControl(cc string) error {
	const allowed = "/proc/sys/net/ipv4/tcp_allowed_congestion_control"
	avail, err := os.ReadFile("/proc/sys/net/ipv4/tcp_available_congestion_control")
	if err != nil {
		return err
	}
	if !slices.Contains(strings.Fields(string(avail)), cc) {
		return fmt.Errorf("%q is not available", cc)
	}
	cur, err := os.ReadFile(allowed)
	if err != nil {
		return err
	}
	list := strings.Fields(string(cur))
	if slices.Contains(list, cc) {
		return nil
	}
	return os.WriteFile(allowed, []byte(strings.Join(append(list, cc), " ")), 0o644)
}

// CongestionControl reads net.ipv4.tcp_congestion_control of node.
func (n *Network) CongestionControl(node string) (string, error) {
	st, err := n.node(node)
	if err != nil {
		return "", err
	}
	if st.host {
		b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control")
		return strings.TrimSpace(string(b)), err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := nsExec(ctx, st.ns, "cat", "/proc/sys/net/ipv4/tcp_congestion_control")
	if err != nil {
		return "", fmt.Errorf("node %q: read congestion control: %s: %w", node, out, err)
	}
	return strings.TrimSpace(out), nil
}
