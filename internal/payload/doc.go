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
//	offset 16 ...      padding (zero bytes) up to the message size
//
// 16 bytes keep the header below the smallest message size of the
// experiments (E7 starts at 16 B). Decoders accept a larger header length
// from a future version 1 writer and skip the extra bytes.
//
// Concurrency: the package has no state; all functions are safe for
// concurrent use. It imports only the standard library.
package payload
