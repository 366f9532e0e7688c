// Package pcap reads (and, for tests and fixtures, writes) classic libpcap
// capture files, the format the link emulator writes per link end. It knows
// just enough to drive the report's energy model: the timestamp, length and
// IP source/destination of every packet. Link types: LINKTYPE_RAW (101) and
// LINKTYPE_IPV4/IPV6 (228/229), whose packets start with the IP header, and
// LINKTYPE_ETHERNET (1). Both byte orders and both microsecond and
// nanosecond timestamp variants are accepted.
//
// A Reader or Writer must not be used from several goroutines at once; the
// functions hold no global state.
package pcap
