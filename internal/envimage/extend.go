package envimage

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/paddock-dev/paddock/internal/image"
)

// entrySum identifies a tar entry's metadata and content: two entries with the same sum unpack
// to the same file.
type entrySum [sha256.Size]byte

// layerIndex is every path of a layer with its entry's sum.
type layerIndex map[string]entrySum

// sumEntry is h's sum with content data (a regular file's bytes, nil otherwise). Of the PAX
// records only the extended attributes count: the others restate the header's fields.
func sumEntry(h *tar.Header, data []byte) entrySum {
	d := sha256.New()
	fmt.Fprintf(d, "%c %o %d %d %s %s %d %q %d %d %d\n", h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname,
		h.ModTime.Unix(), h.Linkname, h.Devmajor, h.Devminor, h.Size)
	keys := make([]string, 0, len(h.PAXRecords))
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "SCHILY.xattr.") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(d, "%q=%q\n", k, h.PAXRecords[k])
	}
	content := sha256.Sum256(data)
	d.Write(content[:])
	return entrySum(d.Sum(nil))
}

// entryPath is a tar entry's name as an absolute path: mmdebstrap names them "./usr/bin/...".
func entryPath(name string) string { return path.Clean("/" + name) }

// indexLayer reads the gzip-compressed layer file p into an index.
func indexLayer(p string) (layerIndex, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("reading the base layer %s: %w", p, err)
	}
	idx := layerIndex{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return idx, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the base layer %s: %w", p, err)
		}
		var data []byte
		if h.Typeflag == tar.TypeReg {
			if data, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("reading the base layer %s: %w", p, err)
			}
		}
		idx[entryPath(h.Name)] = sumEntry(h, data)
	}
}

// compressDiff reads the tar stream of a whole root filesystem from src and writes to dst,
// gzip-compressed, the layer that turns base into it: every entry that is new or differs (in
// content or metadata), and a whiteout for every path of base that is gone (one for a directory,
// none for what was inside it). inspect (when set) sees every entry of src, changed or not.
func compressDiff(dst io.Writer, src io.Reader, base layerIndex, inspect func(h *tar.Header, content io.Reader) error) (image.LayerInfo, error) {
	pr, pw := io.Pipe()
	var info image.LayerInfo
	var cerr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		info, cerr = image.CompressTar(dst, pr, nil)
		pr.CloseWithError(cerr) // a failed compression stops the writer below
	}()
	tw := tar.NewWriter(pw)
	err := writeDiff(tw, src, base, inspect)
	if err == nil {
		err = tw.Close()
	}
	pw.CloseWithError(err)
	<-done
	if err != nil {
		return image.LayerInfo{}, err
	}
	return info, cerr
}

func writeDiff(tw *tar.Writer, src io.Reader, base layerIndex, inspect func(h *tar.Header, content io.Reader) error) error {
	tr := tar.NewReader(src)
	seen := map[string]bool{}
	written := map[string]bool{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading the root filesystem's tar stream: %w", err)
		}
		name := entryPath(h.Name)
		seen[name] = true
		var data []byte
		if h.Typeflag == tar.TypeReg {
			if data, err = io.ReadAll(tr); err != nil {
				return fmt.Errorf("reading the root filesystem's tar stream: %w", err)
			}
		}
		if inspect != nil {
			if err := inspect(h, bytes.NewReader(data)); err != nil {
				return err
			}
		}
		old, had := base[name]
		changed := !had || old != sumEntry(h, data)
		// A hard link to a file this layer replaces is replaced with it.
		if h.Typeflag == tar.TypeLink && written[entryPath(h.Linkname)] {
			changed = true
		}
		if !changed {
			continue
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
		written[name] = true
	}
	var gone []string
	for name := range base {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	slices.Sort(gone)
	removed := map[string]bool{}
	for _, name := range gone {
		removed[name] = true
		if removed[path.Dir(name)] {
			continue // the whiteout of its directory removes it
		}
		wh := &tar.Header{Name: "." + path.Join(path.Dir(name), ".wh."+path.Base(name)), Typeflag: tar.TypeReg, Mode: 0o644,
			ModTime: epoch()}
		if err := tw.WriteHeader(wh); err != nil {
			return err
		}
	}
	return nil
}

// epoch is sourceDateEpoch as a time, the timestamp of the whiteouts.
func epoch() time.Time {
	s, _ := strconv.ParseInt(sourceDateEpoch, 10, 64)
	return time.Unix(s, 0)
}
