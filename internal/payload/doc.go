// Package payload is the iotq measurement payload: a small binary header
// (magic, version, header length, sequence number, send time in Unix
// nanoseconds) padded with zero bytes to the requested message size.
//
// A publisher stamps each message with Encode just before it hands the
// message to the client library; a subscriber that recognises the header
// with Decode computes the one-way delay as its receive time minus the send
// time (all nodes of one lab run share the host clock).
//
// Wire layout (big endian, HeaderSize = 16 bytes):
//
//	offset 0  2 bytes  magic "IQ" (0x49 0x51)
//	offset 2  1 byte   version (1)
//	offset 3  1 byte   header length in bytes (16 for version 1)
//	offset 4  4 bytes  sequence number (uint32)
//	offset 8  8 bytes  send time, Unix nanoseconds (int64)
//	offset 16 8 bytes  run id (uint64), only when the header length is 24
//	...                padding (zero bytes) up to the message size
//
// 16 bytes keep the header below the smallest message size of the
// experiments (E7 starts at 16 B). The run id (random per publisher run)
// lets a subscriber tell two runs that reuse sequence numbers apart; it is
// written when the payload has room (24 bytes or more) and marked by the
// header length 24, so the version stays 1 and decoders written before it
// (which skip header bytes they do not know) still read seq and send time.
//
// Concurrency: the package has no state; all functions are safe for
// concurrent use. It imports only the standard library.
package payload
