// Package certs creates and loads the TLS material of an iotq broker: a
// private certificate authority (ECDSA P-256), a server leaf certificate
// signed by it with SANs for the names and addresses clients use, and
// persistent session-ticket keys so TLS resumption and QUIC 0-RTT survive a
// broker restart.
//
// Files live in DIR/tls: ca.pem, ca-key.pem, server.pem, server-key.pem and
// ticket.keys. Private keys and ticket keys are written with mode 0600, every
// file through a temporary file and a rename, so a reader never sees half a
// file.
//
// Concurrency: the functions hold no state between calls. EnsureServerCert
// and LoadOrCreateTicketKeys take an advisory file lock (DIR/tls/.lock) while
// they create or change files, so several processes sharing one state
// directory (a lab starting brokers) agree on one CA and one set of keys.
//
// certs imports nothing from iotq.
package certs
