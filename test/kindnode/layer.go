package kindnode

import (
	"archive/tar"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// entry is one file, folder or symlink of a layer.
type entry struct {
	// Name is the path inside the image, without a leading slash.
	Name string
	Mode int64
	// Data is a file's content; From, when set, names a host file whose
	// content it is instead (large binaries are streamed, not held).
	Data []byte
	From string
	// Link makes the entry a symlink to Link.
	Link string
	Dir  bool
}

// writeLayer writes entries as a tar: every parent folder present, sorted
// by name, owned by root, every time set to epoch, so that equal entries
// give equal bytes.
func writeLayer(w io.Writer, entries []entry, epoch time.Time) error {
	all := map[string]entry{}
	for _, e := range entries {
		all[e.Name] = e
		for d := path.Dir(e.Name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = entry{Name: d, Mode: 0o755, Dir: true}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	tw := tar.NewWriter(w)
	for _, n := range names {
		e := all[n]
		h := &tar.Header{Name: n, Mode: e.Mode, ModTime: epoch, Format: tar.FormatPAX}
		var body io.Reader
		switch {
		case e.Dir:
			h.Typeflag, h.Name = tar.TypeDir, n+"/"
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, e.Link, 0o777
		case e.From != "":
			f, err := os.Open(e.From)
			if err != nil {
				return err
			}
			defer f.Close()
			st, err := f.Stat()
			if err != nil {
				return err
			}
			h.Typeflag, h.Size, body = tar.TypeReg, st.Size(), f
		default:
			h.Typeflag, h.Size, body = tar.TypeReg, int64(len(e.Data)), strings.NewReader(string(e.Data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return fmt.Errorf("layer entry %s: %w", n, err)
		}
		if body != nil {
			if _, err := io.Copy(tw, body); err != nil {
				return fmt.Errorf("layer entry %s: %w", n, err)
			}
		}
	}
	return tw.Close()
}
