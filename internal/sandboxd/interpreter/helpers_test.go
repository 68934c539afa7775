package interpreter

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"testing"
	"time"
)

// debianPython is the interpreter the tests run: Debian's, with python3-numpy, -pandas and
// -matplotlib (hack/install-deps.sh).
const debianPython = "/usr/bin/python3"

// newServer serves an interpreter over a temporary root until the test ends.
func newServer(t testing.TB, opts ...func(*Config)) (*Server, string) {
	t.Helper()
	if _, err := os.Stat(debianPython); err != nil {
		t.Fatalf("%s is missing: run hack/install-deps.sh", debianPython)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatal("node is not on PATH: the JavaScript kernel needs Node.js")
	}
	dir := t.TempDir()
	cfg := Config{Python: debianPython, Dir: dir, Environ: func() []string {
		return []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "SANDBOX_VISIBLE=yes"}
	}, InterruptGrace: 2 * time.Second}
	for _, o := range opts {
		o(&cfg)
	}
	s := New(cfg)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { srv.Close(); s.Close() })
	return s, srv.URL
}

// line is one decoded NDJSON line.
type line map[string]any

// execute posts body to /execute and returns the lines, failing on a status other than 200.
func execute(t testing.TB, url string, body map[string]any) []line {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(url+"/execute", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /execute %s: %s", b, resp.Status)
	}
	var out []line
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		raw := sc.Bytes()
		for _, c := range raw {
			if c >= 0x80 {
				t.Fatalf("non-ASCII byte in line %s", raw)
			}
		}
		var l line
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("line %q: %v", raw, err)
		}
		out = append(out, l)
	}
	if len(out) == 0 || out[len(out)-1]["type"] != lineEnd {
		t.Fatalf("the stream does not end with end_of_execution: %v", out)
	}
	return out
}

// ofType returns the lines of type typ.
func ofType(lines []line, typ string) []line {
	var out []line
	for _, l := range lines {
		if l["type"] == typ {
			out = append(out, l)
		}
	}
	return out
}

// stdout is the concatenated text of the stdout lines.
func stdout(lines []line, typ string) string {
	var s string
	for _, l := range ofType(lines, typ) {
		s += l["text"].(string)
	}
	return s
}

// mainText is the text of the main result, or "" without one.
func mainText(lines []line) string {
	for _, l := range ofType(lines, lineResult) {
		if l["is_main_result"] == true {
			s, _ := l["text"].(string)
			return s
		}
	}
	return ""
}

func errorOf(lines []line) line {
	errs := ofType(lines, lineError)
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}
