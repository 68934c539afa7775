package layer

import (
	"archive/tar"
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tarOf builds an input tar from headers; a regular file's content is its name repeated to Size.
func tarOf(t *testing.T, hs ...*tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range hs {
		if h.Format == tar.FormatUnknown && h.PAXRecords != nil {
			h.Format = tar.FormatPAX
		}
		must(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write(bytes.Repeat([]byte("x"), int(h.Size)))
			must(t, err)
		}
	}
	must(t, tw.Close())
	return buf.Bytes()
}

func convert(t *testing.T, in []byte, o Options) ([]byte, Stats, error) {
	t.Helper()
	var out bytes.Buffer
	st, err := FromOverlayTar(bytes.NewReader(in), &out, o)
	return out.Bytes(), st, err
}

// TestOverlayTarConverts: gVisor's conventions become OCI ones; names are made relative.
func TestOverlayTarConverts(t *testing.T) {
	in := tarOf(t,
		&tar.Header{Typeflag: tar.TypeDir, Name: "/", Mode: 0o755},
		&tar.Header{Typeflag: tar.TypeDir, Name: "/etc/", Mode: 0o755},
		&tar.Header{Typeflag: tar.TypeReg, Name: "/etc/app.conf", Mode: 0o640, Uid: 7, Gid: 8, Size: 3},
		&tar.Header{Typeflag: tar.TypeLink, Name: "/etc/app.hard", Linkname: "/etc/app.conf", Mode: 0o640},
		&tar.Header{Typeflag: tar.TypeChar, Name: "/etc/gone", Devmajor: 0, Devminor: 0},
		&tar.Header{Typeflag: tar.TypeSymlink, Name: "./etc/link", Linkname: "../../../host", Mode: 0o777},
		&tar.Header{Typeflag: tar.TypeDir, Name: "/var/cache/", Mode: 0o700, PAXRecords: map[string]string{paxOpaque: "y"}},
		&tar.Header{Typeflag: tar.TypeFifo, Name: "/var/fifo", Mode: 0o600},
	)
	b, st, err := convert(t, in, opts())
	if err != nil {
		t.Fatalf("FromOverlayTar: %v", err)
	}
	want := []entry{
		{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "etc/app.conf", Type: tar.TypeReg, Mode: 0o640, UID: 7, GID: 8, Content: "xxx"},
		{Name: "etc/app.hard", Type: tar.TypeLink, Mode: 0o640, Link: "etc/app.conf"},
		{Name: "etc/.wh.gone", Type: tar.TypeReg, Mode: 0o600},
		{Name: "etc/link", Type: tar.TypeSymlink, Mode: 0o777, Link: "../../../host"},
		{Name: "var/cache/", Type: tar.TypeDir, Mode: 0o700},
		{Name: "var/cache/.wh..wh..opq", Type: tar.TypeReg, Mode: 0o600},
		{Name: "var/fifo", Type: tar.TypeFifo, Mode: 0o600},
	}
	if d := cmp.Diff(want, readLayer(t, b)); d != "" {
		t.Errorf("layer (-want +got):\n%s", d)
	}
	if st.Whiteouts != 2 || st.ContentBytes != 3 {
		t.Errorf("stats %+v: want 2 whiteouts and 3 bytes", st)
	}
}

// TestOverlayTarWhiteoutHardLinks: runsc writes the whiteouts after the first as hard links to it
// (seen on the dev cluster after sandboxd's uploads, which rename a temporary file); each is one
// more whiteout, never a link to a file.
func TestOverlayTarWhiteoutHardLinks(t *testing.T) {
	in := tarOf(t,
		&tar.Header{Typeflag: tar.TypeDir, Name: "/home/user/", Mode: 0o755},
		&tar.Header{Typeflag: tar.TypeChar, Name: "/home/user/.sandboxd-tmp-a", Devmajor: 0, Devminor: 0},
		&tar.Header{Typeflag: tar.TypeLink, Name: "/home/user/.sandboxd-tmp-b", Linkname: "./home/user/.sandboxd-tmp-a"},
		&tar.Header{Typeflag: tar.TypeReg, Name: "/home/user/state.txt", Mode: 0o644, Size: 3},
	)
	b, st, err := convert(t, in, opts())
	if err != nil {
		t.Fatalf("FromOverlayTar: %v", err)
	}
	want := []entry{
		{Name: "home/user/", Type: tar.TypeDir, Mode: 0o755},
		{Name: "home/user/.wh..sandboxd-tmp-a", Type: tar.TypeReg, Mode: 0o600},
		{Name: "home/user/.wh..sandboxd-tmp-b", Type: tar.TypeReg, Mode: 0o600},
		{Name: "home/user/state.txt", Type: tar.TypeReg, Mode: 0o644, Content: "xxx"},
	}
	if d := cmp.Diff(want, readLayer(t, b)); d != "" {
		t.Errorf("layer (-want +got):\n%s", d)
	}
	if st.Whiteouts != 2 {
		t.Errorf("stats %+v: want 2 whiteouts", st)
	}
}

// TestOverlayTarRefuses: hostile entries fail the conversion, naming the path.
func TestOverlayTarRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		hs   []*tar.Header
		o    func(*Options)
		want string
	}{
		"dot-dot path": {hs: []*tar.Header{{Typeflag: tar.TypeReg, Name: "a/../../etc/passwd", Size: 1}}, want: `".." in "/a": not a file name`},
		"hard link out of the layer": {hs: []*tar.Header{{Typeflag: tar.TypeLink, Name: "x", Linkname: "../../etc/shadow"}},
			want: "hard link"},
		"hard link to an unseen file": {hs: []*tar.Header{{Typeflag: tar.TypeLink, Name: "x", Linkname: "etc/shadow"}},
			want: "not a file earlier in this layer"},
		"hard link to a directory": {hs: []*tar.Header{{Typeflag: tar.TypeDir, Name: "d/"}, {Typeflag: tar.TypeLink, Name: "x", Linkname: "d"}},
			want: "not a file earlier in this layer"},
		"device":                {hs: []*tar.Header{{Typeflag: tar.TypeChar, Name: "dev/mem", Devmajor: 1, Devminor: 1}}, want: "/dev/mem: a device node (1:1)"},
		"block device":          {hs: []*tar.Header{{Typeflag: tar.TypeBlock, Name: "sda", Devmajor: 8}}, want: "/sda: a block device"},
		"whiteout-looking name": {hs: []*tar.Header{{Typeflag: tar.TypeReg, Name: "tmp/.wh.passwd"}}, want: `names starting with ".wh."`},
		"over the budget": {hs: []*tar.Header{{Typeflag: tar.TypeReg, Name: "big", Size: 2048}}, o: func(o *Options) { o.MaxBytes = 1024 },
			want: "/big: its 2048 bytes would take the layer past its limit of 1024 bytes"},
		"too deep":     {hs: []*tar.Header{{Typeflag: tar.TypeDir, Name: "a/b/c/d/"}}, o: func(o *Options) { o.MaxDepth = 2 }, want: "deeper than 2"},
		"unknown type": {hs: []*tar.Header{{Typeflag: 'Z', Name: "odd"}}, want: "is not a file, directory"},
	} {
		t.Run(name, func(t *testing.T) {
			o := opts()
			if tc.o != nil {
				tc.o(&o)
			}
			if _, _, err := convert(t, tarOf(t, tc.hs...), o); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestOverlayTarExcludes: excluded paths are left out.
func TestOverlayTarExcludes(t *testing.T) {
	o := opts()
	o.Exclude = []string{"run/secrets"}
	b, st, err := convert(t, tarOf(t,
		&tar.Header{Typeflag: tar.TypeReg, Name: "/run/secrets/token", Size: 3},
		&tar.Header{Typeflag: tar.TypeReg, Name: "/keep", Size: 1},
	), o)
	must(t, err)
	if got := readLayer(t, b); len(got) != 1 || got[0].Name != "keep" || len(st.Skipped) != 1 {
		t.Errorf("entries %+v, skipped %v; want only keep, run/secrets/token skipped", got, st.Skipped)
	}
}
