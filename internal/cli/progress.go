package cli

import (
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/term"
)

// progressMin is the size from which a copy shows progress on a terminal.
const progressMin = 1 << 20

// Progress formats a progress line: "copying data.bin  12.0 MiB / 48.0 MiB  25%".
func Progress(label string, done, total int64) string {
	if total <= 0 {
		return fmt.Sprintf("copying %s  %s", label, byteSize(done))
	}
	return fmt.Sprintf("copying %s  %s / %s  %d%%", label, byteSize(done), byteSize(total), done*100/total)
}

func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 4; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTP"[exp])
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress counts the bytes of one copy and, on a terminal, redraws one status line at most
// every progressEvery once the copy is large.
type progress struct {
	w           io.Writer
	on          bool
	label       string
	total, done int64
	last        time.Time
	drawn       bool
}

const progressEvery = 200 * time.Millisecond

func newProgress(w io.Writer, tty bool, label string, total int64) *progress {
	return &progress{w: w, on: tty, label: label, total: total}
}

func (p *progress) add(n int64) {
	p.done += n
	if !p.on || (p.total >= 0 && p.total < progressMin) || (p.total < 0 && p.done < progressMin) {
		return
	}
	if now := time.Now(); now.Sub(p.last) >= progressEvery {
		p.last = now
		p.drawn = true
		fmt.Fprintf(p.w, "\r%s\x1b[K", Progress(p.label, p.done, p.total))
	}
}

func (p *progress) finish() {
	if p.drawn {
		fmt.Fprintf(p.w, "\r%s\x1b[K\n", Progress(p.label, p.done, p.total))
	}
}

type progressWriter struct {
	w io.Writer
	p *progress
}

func (pw progressWriter) Write(b []byte) (int, error) {
	n, err := pw.w.Write(b)
	pw.p.add(int64(n))
	return n, err
}

func (p *progress) writer(w io.Writer) io.Writer { return progressWriter{w, p} }

type progressReader struct {
	r io.Reader
	p *progress
}

func (pr progressReader) Read(b []byte) (int, error) {
	n, err := pr.r.Read(b)
	pr.p.add(int64(n))
	return n, err
}

func (p *progress) reader(r io.Reader) io.Reader { return progressReader{r, p} }

// progressFile counts reads of a local file and stays an io.Seeker, so the SDK can rewind it
// for a retry; rewinding takes back the bytes counted for this file.
type progressFile struct {
	f    *os.File
	p    *progress
	read int64
}

func (pf *progressFile) Read(b []byte) (int, error) {
	n, err := pf.f.Read(b)
	pf.read += int64(n)
	pf.p.add(int64(n))
	return n, err
}

func (pf *progressFile) Seek(offset int64, whence int) (int64, error) {
	pos, err := pf.f.Seek(offset, whence)
	if err == nil {
		pf.p.done -= pf.read - pos
		pf.read = pos
	}
	return pos, err
}

func (p *progress) file(f *os.File) io.Reader { return &progressFile{f: f, p: p} }
