// Package profile holds the words of a link that the emulator, the lab and
// the report share: the table of named link profiles of experiments.md
// (wifi, cellular, satellite, ethernet) and the one set of parsers and
// formatters of link units: rates in bit/s as tc writes them ("20mbit";
// "mbps" is megabytes per second, as in tc), losses, durations and sizes
// in bytes.
//
// It imports only the standard library, so that the report (which must not
// import the emulator in package link) can use it.
package profile
