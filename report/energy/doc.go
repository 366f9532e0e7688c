// Package energy estimates the radio energy of a node from its packet
// timeline with a per-technology power-state model in the style of Huang et
// al. (MobiSys 2012): an idle radio is promoted (promotion power for the
// promotion time), transfers at a power that grows linearly with the uplink
// and downlink throughput (P = beta + alpha_u*t_u + alpha_d*t_d, t in
// Mbit/s), then stays in a high-power tail for the tail time before it falls
// back to idle. It also holds the processor part (CPU time x active power)
// and the alignment of an external power log with a time window.
//
// Models are plain values and every function is pure, so the package is safe
// for concurrent use. It imports only the standard library.
package energy
