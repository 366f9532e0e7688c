// Address plan: the /24 of each link and medium, and the lock that keeps
// concurrent runs from picking the same host-side subnet.

package link

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"

	"golang.org/x/sys/unix"
)

type subnet struct {
	prefix netip.Prefix
	addrs  map[string]netip.Addr // node -> address
	ifs    map[string]string     // node -> interface name
}

func hostAddr(p netip.Prefix, i int) netip.Addr {
	a := p.Addr().As4()
	a[3] = byte(i)
	return netip.AddrFrom4(a)
}

// lockHostSubnets serializes the choice of host-side subnets between
// processes (flock on a file in /run).
func lockHostSubnets() (*os.File, error) {
	f, err := os.OpenFile("/run/iotq-link.lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("host subnet lock: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("host subnet lock: %w", err)
	}
	return f, nil
}

// freeHostSubnet picks a 10.79.X.0/24 that no interface of the host
// namespace uses. The caller holds the host subnet lock until the address
// is assigned.
func freeHostSubnet() (netip.Prefix, error) {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").CombinedOutput()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("list host addresses: %s: %w", out, err)
	}
	used := string(out)
	for x := 1; x < 255; x++ {
		if !strings.Contains(used, fmt.Sprintf(" 10.79.%d.", x)) {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 79, byte(x), 0}), 24), nil
		}
	}
	return netip.Prefix{}, errors.New("no free host subnet in 10.79.0.0/16: remove stale interfaces with 'iotq link down'")
}

// subnetPlan hands out the /24 of each link and medium during one build.
// It holds the host subnet lock from the first host-side pick until
// release, when the addresses are assigned.
type subnetPlan struct{ lock *os.File }

// pick returns the /24 of the k-th link (second = 77) or medium (78):
// 10.second.(k+1).0/24 between namespaces, or a free 10.79.X.0/24 when one
// end is in the host namespace.
func (sp *subnetPlan) pick(host bool, second byte, k int) (netip.Prefix, error) {
	if !host {
		return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, second, byte(k + 1), 0}), 24), nil
	}
	if sp.lock == nil {
		f, err := lockHostSubnets()
		if err != nil {
			return netip.Prefix{}, err
		}
		sp.lock = f
	}
	return freeHostSubnet()
}

// release drops the host subnet lock, if held.
func (sp *subnetPlan) release() {
	if sp.lock != nil {
		sp.lock.Close()
		sp.lock = nil
	}
}
