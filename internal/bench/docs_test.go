package bench

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReplaceRegion(t *testing.T) {
	doc := "# Perf\n\nby hand\n\n" + docBegin + "\nold results\n" + docEnd + "\n\nmore by hand\n"
	tests := []struct {
		name, doc, want, wantErr string
	}{
		{
			name: "replaces only the region",
			doc:  doc,
			want: "# Perf\n\nby hand\n\n" + docBegin + "\nnew\ntable\n" + docEnd + "\n\nmore by hand\n",
		},
		{name: "no markers", doc: "# Perf\n", wantErr: "lacks the markers"},
		{name: "end only", doc: docEnd + "\n", wantErr: "lacks the markers"},
		{name: "twice", doc: doc + doc, wantErr: "more than once"},
		{name: "reversed", doc: docEnd + "\n" + docBegin + "\n", wantErr: "comes before"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ReplaceRegion(tc.doc, "\nnew\ntable\n\n")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ReplaceRegion error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ReplaceRegion (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDocSectionLinksPlots(t *testing.T) {
	r := sampleReport()
	r.Conditions.Command = "bin/paddock-bench --kwok"
	got := DocSection(r, "bench")
	for _, want := range []string{
		"```sh\nbin/paddock-bench --kwok\n```",
		"| warm 5/s | 2 | 2 | 12 ms |",
		"![warm 5/s](bench/scenario-1.svg)",
		"![cold <none>](bench/scenario-2.svg)",
		"![latency percentiles by claim rate](bench/percentiles.svg)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("DocSection lacks %q:\n%s", want, got)
		}
	}
}

// TestUpdateDoc runs what `make bench` runs after a benchmark: the document's region is
// rewritten, the text around it kept, stale plots replaced.
func TestUpdateDoc(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "performance.md")
	before, after := "# Performance\n\nMethod by hand.\n\n", "\n\nHistory by hand.\n"
	if err := os.WriteFile(doc, []byte(before+docBegin+"\nold\n"+docEnd+after), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bench", "scenario-9.svg"), []byte("<svg/>"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := UpdateDoc(doc, sampleReport()); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := before + docBegin + "\n" + strings.TrimSpace(DocSection(sampleReport(), "bench")) + "\n" + docEnd + after
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("document (-want +got):\n%s", diff)
	}
	plots, _ := filepath.Glob(filepath.Join(dir, "bench", "*.svg"))
	sort.Strings(plots)
	for i := range plots {
		plots[i] = filepath.Base(plots[i])
	}
	if diff := cmp.Diff([]string{"percentiles.svg", "scenario-1.svg", "scenario-2.svg"}, plots); diff != "" {
		t.Errorf("plots (-want +got):\n%s", diff)
	}
}

func TestUpdateDocWithoutMarkersChangesNothing(t *testing.T) {
	doc := filepath.Join(t.TempDir(), "performance.md")
	if err := os.WriteFile(doc, []byte("# by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := UpdateDoc(doc, sampleReport())
	if err == nil || !strings.Contains(err.Error(), "lacks the markers") {
		t.Fatalf("UpdateDoc = %v, want an error about the markers", err)
	}
	data, _ := os.ReadFile(doc)
	if diff := cmp.Diff("# by hand\n", string(data)); diff != "" {
		t.Errorf("document changed (-want +got):\n%s", diff)
	}
}

func TestReadReportRoundTrips(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteFiles(dir, sampleReport()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(sampleReport(), got); diff != "" {
		t.Errorf("ReadReport (-want +got):\n%s", diff)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReport(dir); err == nil || !strings.Contains(err.Error(), "not a paddock-bench report") {
		t.Errorf("ReadReport of garbage = %v, want a clear error", err)
	}
}
