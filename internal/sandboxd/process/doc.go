// Package process runs commands for sandboxd: each child gets its own process group (or its own
// session when it has a PTY), its output is delivered as ordered chunks that end before the exit
// code is known, and cancelling the context kills the whole group, not just the direct child.
// A Manager numbers processes with virtual ids (1, 2, ...) so clients can address them for
// stdin, signals and terminal resizes while their Start call lasts.
package process
