package gateway

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// proxyV2Signature starts every PROXY protocol v2 header.
var proxyV2Signature = []byte("\r\n\r\n\x00\r\nQUIT\n")

// proxyV2Header returns a PROXY protocol v2 header (command PROXY) saying
// the connection came from src to dst. The transport byte says STREAM:
// what the upstream receives is a byte stream, and brokers that accept the
// header (RabbitMQ, HAProxy-fronted EMQX) expect TCP; the device's address
// and port are those of its QUIC (UDP) socket. Addresses that are not IP
// give the LOCAL command (the upstream then uses the real peer address).
func proxyV2Header(src, dst net.Addr) []byte {
	s, sok := addrPort(src)
	d, dok := addrPort(dst)
	h := append([]byte{}, proxyV2Signature...)
	if !sok || !dok {
		return append(h, 0x20, 0x00, 0, 0) // v2 LOCAL, UNSPEC, no address
	}
	if s.Addr().Is4() && d.Addr().Is4() {
		h = append(h, 0x21, 0x11, 0, 12) // v2 PROXY, AF_INET STREAM, 12 bytes
		a, b := s.Addr().As4(), d.Addr().As4()
		h = append(h, a[:]...)
		h = append(h, b[:]...)
	} else {
		h = append(h, 0x21, 0x21, 0, 36) // v2 PROXY, AF_INET6 STREAM, 36 bytes
		a, b := s.Addr().As16(), d.Addr().As16()
		h = append(h, a[:]...)
		h = append(h, b[:]...)
	}
	h = binary.BigEndian.AppendUint16(h, s.Port())
	return binary.BigEndian.AppendUint16(h, d.Port())
}

// addrPort converts a UDP or TCP address, unmapping IPv4-in-IPv6.
func addrPort(a net.Addr) (netip.AddrPort, bool) {
	var ap netip.AddrPort
	switch v := a.(type) {
	case *net.UDPAddr:
		ap = v.AddrPort()
	case *net.TCPAddr:
		ap = v.AddrPort()
	default:
		return ap, false
	}
	if !ap.Addr().IsValid() {
		return ap, false
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
}
