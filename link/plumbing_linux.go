// TUN devices, namespaces and the ip command: the plumbing under a Network.

package link

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Preflight checks what Up needs (root, /dev/net/tun, the ip command) and
// returns an error that says what is missing and how to get it.
func Preflight() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: run as root, for example with sudo", ErrNotRoot)
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("%w: it is missing (load the tun module: modprobe tun)", ErrNoTUN)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return fmt.Errorf("%w: install it (apt-get install iproute2)", ErrNoIP)
	}
	return nil
}

// addEndpoint creates a TUN, moves it into the node's namespace and
// configures address, MTU and state.
func (n *Network) addEndpoint(ctx context.Context, owner string, st *nodeState, addr netip.Addr, mtu int) (*endpoint, error) {
	pattern := strings.TrimRight(n.prefix, "-_")
	if len(pattern) > 10 {
		pattern = pattern[:10]
	}
	f, ifname, err := openTUN(pattern + "%d")
	if err != nil {
		return nil, fmt.Errorf("%s end %q: %w", owner, st.name, err)
	}
	e := &endpoint{node: st, owner: owner, ifname: ifname, addr: addr, f: f}
	n.eps = append(n.eps, e)
	st.eps = append(st.eps, e)
	cidr := netip.PrefixFrom(addr, 24).String()
	mtuS := strconv.Itoa(mtu)
	// A long TUN queue, so bursts wait for our reader instead of being
	// dropped by the kernel where no counter of ours sees them.
	const txqlen = "10000"
	fail := func(what, out string, err error) error {
		return fmt.Errorf("%s end %q: %s: %s: %w", owner, st.name, what, strings.TrimSpace(out), err)
	}
	if st.host {
		_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+ifname+"/disable_ipv6", []byte("1"), 0o644) // best effort: IPv6 packets are ignored anyway
		if out, err := ipCmd(ctx, "addr", "add", cidr, "dev", ifname); err != nil {
			return nil, fail("address", out, err)
		}
		if out, err := ipCmd(ctx, "link", "set", "dev", ifname, "mtu", mtuS, "txqueuelen", txqlen, "up"); err != nil {
			return nil, fail("link up", out, err)
		}
		return e, nil
	}
	// Inside the node the interface is named after its link (TUN names in
	// the host namespace are reused, so two ends would clash otherwise).
	inner := owner
	if len(inner) > 15 {
		inner = fmt.Sprintf("iotq%d", len(st.eps)-1)
	}
	if out, err := ipCmd(ctx, "link", "set", "dev", ifname, "netns", st.ns, "name", inner); err != nil {
		return nil, fail("move into namespace", out, err)
	}
	ifname = inner
	e.ifname = inner
	if out, err := ipCmd(ctx, "-n", st.ns, "addr", "add", cidr, "dev", ifname); err != nil {
		return nil, fail("address", out, err)
	}
	if out, err := ipCmd(ctx, "-n", st.ns, "link", "set", "dev", ifname, "mtu", mtuS, "txqueuelen", txqlen, "up"); err != nil {
		return nil, fail("link up", out, err)
	}
	return e, nil
}

func ipCmd(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ip", args...)
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return strings.TrimSpace(buf.String()), err
}

func nsExec(ctx context.Context, ns string, name string, args ...string) (string, error) {
	return ipCmd(ctx, append([]string{"netns", "exec", ns, name}, args...)...)
}

// Do runs fn on an OS thread that has entered node's network namespace, so
// the sockets fn creates (net.ListenPacket, net.Dial...) live there and
// keep working after Do returns. fn must not start goroutines that expect
// to be in the namespace. For the host node fn runs directly.
func (n *Network) Do(node string, fn func() error) error {
	st, err := n.node(node)
	if err != nil {
		return err
	}
	if st.host {
		return fn()
	}
	return doInNamespace(st.ns, fn)
}

func doInNamespace(ns string, fn func() error) error {
	target, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open namespace %s: %w", ns, err)
	}
	defer unix.Close(target)
	orig, err := unix.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open own namespace: %w", err)
	}
	defer unix.Close(orig)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("enter namespace %s: %w", ns, err)
			return
		}
		ferr := fn()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Leave the thread locked: it dies with this goroutine
			// instead of serving others from the wrong namespace.
			errc <- errors.Join(ferr, fmt.Errorf("leave namespace %s: %w", ns, err))
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// openTUN creates a TUN device (IFF_TUN|IFF_NO_PI) whose name the kernel
// picks from pattern (for example "iotq%d"). The fd is non-blocking before
// it is wrapped, so Go's poller drives reads and Close unblocks them.
func openTUN(pattern string) (*os.File, string, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil, "", fmt.Errorf("%w: /dev/net/tun is missing (load the tun module: modprobe tun)", ErrNoTUN)
		}
		return nil, "", fmt.Errorf("%w: open /dev/net/tun: %v", ErrNoTUN, err)
	}
	ifr, err := unix.NewIfreq(pattern)
	if err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("tun name %q: %w", pattern, err)
	}
	ifr.SetUint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("create tun %q: %w", pattern, err)
	}
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return nil, "", fmt.Errorf("tun non-blocking: %w", err)
	}
	name := ifr.Name()
	return os.NewFile(uintptr(fd), "/dev/net/tun:"+name), name, nil
}

// addNamespace creates the namespace of a node (nothing for the host
// node), brings up its loopback and turns IPv6 off in it.
func (n *Network) addNamespace(ctx context.Context, st *nodeState) error {
	if st.host {
		return nil
	}
	if out, err := ipCmd(ctx, "netns", "add", st.ns); err != nil {
		if strings.Contains(out, "exists") {
			st.ns = "" // not ours: do not delete it
			return fmt.Errorf("node %q: namespace %q: %w", st.name, n.nsName(st.name), ErrNameInUse)
		}
		st.ns = "" // creation failed
		return fmt.Errorf("node %q: ip netns add: %s: %w", st.name, out, err)
	}
	script := "ip link set lo up && echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6 && echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6"
	if out, err := nsExec(ctx, st.ns, "sh", "-c", script); err != nil {
		return fmt.Errorf("node %q: namespace setup: %s: %w", st.name, out, err)
	}
	return nil
}
