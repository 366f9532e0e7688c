// Package kvlog is an append-only log of keyed records, for state that
// changes at message rate and must survive a restart: the broker's
// in-flight QoS 1/2 messages. Each Write appends a batch of puts and
// deletes with one write system call (and one fsync if asked), where a
// B+tree rewrote pages, a meta page and a freelist per transaction. Open
// replays the file into the set of live records and cuts off a batch a
// crash left half written. When most of the file is dead records, the live
// ones are copied to a new file that replaces it.
//
// The file: an 8-byte magic, then batches. A batch is the length of its
// body (4 bytes, little endian), the CRC-32C of the body (4 bytes), and the
// body: its ops, each a kind (1 put, 2 delete), the key's length (uvarint)
// and the key, and for a put the value's length (uvarint) and the value.
// A batch is whole or not at all: one cut short or failing its checksum
// ends the log.
package kvlog
