// Package scripts holds no code: its tests check the repository's shell
// scripts (they parse, and the benchmark scripts answer --help without
// starting anything), so that a broken script is found by go test ./...
// rather than at the start of an hour-long benchmark.
package scripts
