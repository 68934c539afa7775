package mcp

import (
	"bytes"
	"fmt"
)

// cappedBuffer keeps the first limit bytes written to it and counts the rest, so a command's
// output or a file read is bounded in memory and in what reaches the model.
type cappedBuffer struct {
	buf     bytes.Buffer
	limit   int
	dropped int64
}

func newCappedBuffer(limit int) *cappedBuffer { return &cappedBuffer{limit: limit} }

// Write never fails: past the limit the bytes are counted, not kept.
func (b *cappedBuffer) Write(p []byte) (int, error) {
	keep := min(len(p), b.limit-b.buf.Len())
	b.buf.Write(p[:keep])
	b.dropped += int64(len(p) - keep)
	return len(p), nil
}

// Truncated reports whether bytes were dropped.
func (b *cappedBuffer) Truncated() bool { return b.dropped > 0 }

// Bytes are the kept bytes.
func (b *cappedBuffer) Bytes() []byte { return b.buf.Bytes() }

// String is the kept text, followed by a marker saying how much was dropped.
func (b *cappedBuffer) String() string {
	if b.dropped == 0 {
		return b.buf.String()
	}
	return fmt.Sprintf("%s\n[paddock: output truncated: %d more bytes not shown; redirect the output to a file and read parts of it]\n", b.buf.String(), b.dropped)
}
