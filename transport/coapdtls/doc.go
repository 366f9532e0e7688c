// Package coapdtls carries CoAP over DTLS 1.2 (coaps://, RFC 7252 section
// 9) on pion/dtls: a listener and a client that look like a
// net.PacketConn, so the CoAP message layer (transport/coapmsg) runs
// unchanged over UDP and DTLS. Pre-shared keys (PSK identities from a file)
// and certificates are supported; the cipher suites include the ones RFC
// 7252 makes mandatory (TLS_PSK_WITH_AES_128_CCM_8,
// TLS_ECDHE_ECDSA_WITH_AES_128_CCM_8).
//
// The listener's addresses (Addr) carry the peer's PSK identity
// (Identity()), which the broker uses as the user of its ACL.
//
// Session resumption (RFC 5246 section 7.3): the listener keeps a bounded,
// expiring store of its sessions with the PSK identity of each, so a
// resumed session keeps its ACL user; a client given a SessionCache
// (transport.FileSessionCache, the file of --session-cache) offers its
// stored session and ClientConn.Resumed says whether the server took it.
//
// Concurrency: a listener owns an accept goroutine and one reader goroutine
// per DTLS session; Close stops and waits for them.
package coapdtls
