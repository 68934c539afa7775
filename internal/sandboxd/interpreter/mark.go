package interpreter

import (
	"bytes"
	"unicode/utf8"
)

// piece is what a markScanner finds in a stream: text, or the end-of-cell mark.
type piece struct {
	text []byte
	mark bool
}

// markScanner splits what a kernel writes to fd 1 or 2 into text and marks. It holds back a
// suffix that could be the start of the mark, and an incomplete UTF-8 character, until more
// bytes arrive, so text is never cut inside either.
type markScanner struct {
	marker []byte
	buf    []byte
}

func (s *markScanner) feed(p []byte) []piece {
	s.buf = append(s.buf, p...)
	var out []piece
	for {
		i := bytes.Index(s.buf, s.marker)
		if i < 0 {
			break
		}
		if i > 0 {
			out = append(out, piece{text: bytes.Clone(s.buf[:i])})
		}
		out = append(out, piece{mark: true})
		s.buf = s.buf[i+len(s.marker):]
	}
	n := len(s.buf) - markPrefixSuffix(s.buf, s.marker)
	n = completeRunes(s.buf[:n])
	if n > 0 {
		out = append(out, piece{text: bytes.Clone(s.buf[:n])})
		s.buf = append(s.buf[:0], s.buf[n:]...)
	}
	return out
}

// markPrefixSuffix is the length of the longest suffix of b that is a proper prefix of marker.
func markPrefixSuffix(b, marker []byte) int {
	for n := min(len(b), len(marker)-1); n > 0; n-- {
		if bytes.HasSuffix(b, marker[:n]) {
			return n
		}
	}
	return 0
}

// completeRunes is the length of b without a trailing incomplete UTF-8 sequence.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
