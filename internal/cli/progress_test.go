package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestProgress(t *testing.T) {
	tests := []struct {
		done, total int64
		want        string
	}{
		{0, 5 << 20, "copying f  0 B / 5.0 MiB  0%"},
		{3 << 19, 6 << 20, "copying f  1.5 MiB / 6.0 MiB  25%"},
		{2 << 30, 2 << 30, "copying f  2.0 GiB / 2.0 GiB  100%"},
		{1500, -1, "copying f  1.5 KiB"},
		{1023, 0, "copying f  1023 B"},
	}
	for _, tt := range tests {
		if got := Progress("f", tt.done, tt.total); got != tt.want {
			t.Errorf("Progress(%d, %d) = %q, want %q", tt.done, tt.total, got, tt.want)
		}
	}
}

// TestProgressLine: the status line is drawn only on a terminal and only for a large copy, and a
// rewound file takes its bytes back.
func TestProgressLine(t *testing.T) {
	var out bytes.Buffer
	small := newProgress(&out, true, "f", 10)
	small.add(10)
	small.finish()
	off := newProgress(&out, false, "f", 4<<20)
	off.add(4 << 20)
	off.finish()
	if out.Len() != 0 {
		t.Errorf("progress printed %q for a small copy or off a terminal, want nothing", out.String())
	}
	big := newProgress(&out, true, "f", 2<<20)
	big.add(1 << 20)
	big.add(1 << 20)
	big.finish()
	if got := out.String(); !strings.HasPrefix(got, "\rcopying f  1.0 MiB / 2.0 MiB  50%") || !strings.HasSuffix(got, "copying f  2.0 MiB / 2.0 MiB  100%\x1b[K\n") {
		t.Errorf("progress output %q, want a first line at 50%% and a last one at 100%%", got)
	}

	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("0123456789"); err != nil {
		t.Fatal(err)
	}
	p := newProgress(&out, false, "f", 10)
	r := p.file(f).(*progressFile)
	if _, err := r.Seek(0, 0); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 6)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Seek(0, 0); err != nil || p.done != 0 {
		t.Errorf("after rewinding: done = %d, %v; want 0", p.done, err)
	}
}
