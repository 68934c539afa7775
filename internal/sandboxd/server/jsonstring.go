package server

import (
	"io"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// jsonStreamer writes JSON through a fixed buffer, keeping the first write error.
type jsonStreamer struct {
	out io.Writer
	buf []byte
	err error
}

func newJSONStreamer(out io.Writer) *jsonStreamer {
	return &jsonStreamer{out: out, buf: make([]byte, 0, 32<<10)}
}

// flushIfFull writes the buffer out when fewer than 16 bytes (the longest escape) are left.
func (s *jsonStreamer) flushIfFull() {
	if cap(s.buf)-len(s.buf) < 16 {
		s.flush()
	}
}

func (s *jsonStreamer) flush() error {
	if s.err == nil && len(s.buf) > 0 {
		_, s.err = s.out.Write(s.buf)
	}
	s.buf = s.buf[:0]
	return s.err
}

func (s *jsonStreamer) raw(text string) {
	s.flushIfFull()
	s.buf = append(s.buf, text...)
}

// string writes b as a JSON string, escaping as encoding/json does (HTML characters and
// U+2028/U+2029 too; invalid UTF-8 becomes U+FFFD) without building the encoded copy in memory:
// output escapes to up to six times its size, which is what made a large legacy /execute cost
// many times its output cap.
func (s *jsonStreamer) string(b []byte) {
	s.raw(`"`)
	for i := 0; i < len(b); {
		s.flushIfFull()
		c := b[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&':
				s.buf = append(s.buf, c)
			case c == '"' || c == '\\':
				s.buf = append(s.buf, '\\', c)
			case c == '\n':
				s.buf = append(s.buf, '\\', 'n')
			case c == '\r':
				s.buf = append(s.buf, '\\', 'r')
			case c == '\t':
				s.buf = append(s.buf, '\\', 't')
			default:
				s.buf = append(s.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			s.buf = append(s.buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			s.buf = append(s.buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			s.buf = append(s.buf, b[i:i+size]...)
		}
		i += size
	}
	s.raw(`"`)
}

// writeLegacyExecuteResponse writes legacy /execute's JSON body to out as it encodes it.
func writeLegacyExecuteResponse(out io.Writer, stdout, stderr []byte, exitCode int) error {
	s := newJSONStreamer(out)
	s.raw(`{"stdout":`)
	s.string(stdout)
	s.raw(`,"stderr":`)
	s.string(stderr)
	s.raw(`,"exit_code":` + strconv.Itoa(exitCode) + "}\n")
	return s.flush()
}
