package server

import (
	"bufio"
	"io"
	"strconv"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// writeJSONString writes b as a JSON string through w, escaping as encoding/json does (HTML
// characters and U+2028/U+2029 too; invalid UTF-8 becomes U+FFFD) without building the encoded
// copy in memory: output escapes to up to six times its size, which is what made a large legacy
// /execute cost many times its output cap.
func writeJSONString(w *bufio.Writer, b []byte) {
	w.WriteByte('"')
	start := 0 // b[start:i] is pending plain bytes
	flush := func(i int) {
		if start < i {
			w.Write(b[start:i])
		}
	}
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			flush(i)
			switch c {
			case '"', '\\':
				w.WriteByte('\\')
				w.WriteByte(c)
			case '\n':
				w.WriteString(`\n`)
			case '\r':
				w.WriteString(`\r`)
			case '\t':
				w.WriteString(`\t`)
			default:
				w.WriteString(`\u00`)
				w.WriteByte(hexDigits[c>>4])
				w.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			flush(i)
			w.WriteString(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			flush(i)
			w.WriteString(`\u202` + string(hexDigits[r&0xf]))
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	flush(len(b))
	w.WriteByte('"')
}

// writeLegacyExecuteResponse writes res as legacy /execute's JSON body, streaming the escaped
// output to out.
func writeLegacyExecuteResponse(out io.Writer, stdout, stderr []byte, exitCode int) error {
	w := bufio.NewWriterSize(out, 32<<10)
	w.WriteString(`{"stdout":`)
	writeJSONString(w, stdout)
	w.WriteString(`,"stderr":`)
	writeJSONString(w, stderr)
	w.WriteString(`,"exit_code":`)
	w.WriteString(strconv.Itoa(exitCode))
	w.WriteString("}\n")
	return w.Flush()
}
