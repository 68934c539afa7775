package interpreter

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalizeLanguage(t *testing.T) {
	for in, want := range map[string]string{"": "python", " Python ": "python", "JS": "javascript", "javascript": "javascript", "ts": "typescript", "Bash": "bash", "r": "r"} {
		if got := NormalizeLanguage(in); got != want {
			t.Errorf("NormalizeLanguage(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestEncodeLineIsASCII(t *testing.T) {
	got := string(encodeLine(map[string]any{"text": "hé ✓ 😀 <b>&"}))
	want := `{"text":"h\u00e9 \u2713 \ud83d\ude00 <b>&"}` + "\n"
	if got != want {
		t.Errorf("got %s want %s", got, want)
	}
	var back map[string]string
	if err := json.Unmarshal([]byte(got), &back); err != nil || back["text"] != "hé ✓ 😀 <b>&" {
		t.Errorf("round trip: %v %q", err, back["text"])
	}
}

func TestResultLine(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	line := resultLine(map[string]json.RawMessage{
		"text/plain": raw(`"'quoted'"`), "text/html": raw(`"<i>x</i>"`), "image/png": raw(`"iVBOR"`),
		"application/json": raw(`{"a":1}`), "e2b/chart": raw(`{"type":"line"}`), "application/vnd.custom": raw(`"c"`),
	}, true)
	var got map[string]any
	if err := json.Unmarshal(line, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"type": "result", "is_main_result": true, "text": "quoted", "html": "<i>x</i>", "png": "iVBOR",
		"json": map[string]any{"a": 1.0}, "chart": map[string]any{"type": "line"}, "extra": map[string]any{"application/vnd.custom": "c"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("result line (-want +got):\n%s", d)
	}
	if got := string(resultLine(nil, false)); got != `{"extra":{},"is_main_result":false,"type":"result"}`+"\n" {
		t.Errorf("empty result: %s", got)
	}
}

func TestStripQuotes(t *testing.T) {
	for in, want := range map[string]string{`'a'`: "a", `"a"`: "a", `'a"`: `'a"`, `'`: `'`, `''`: "", "a": "a"} {
		if got := stripQuotes(in); got != want {
			t.Errorf("stripQuotes(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMarkScanner feeds streams split at every byte and checks text and marks come out whole.
func TestMarkScanner(t *testing.T) {
	const marker = "\x1eMARK\x1f"
	for _, in := range []string{
		"plain" + marker,
		"é✓" + marker + "after",
		"\x1eMA not it" + marker,
		marker + marker,
		"ends with \x1eMA",
	} {
		for _, size := range []int{1, 2, 3, len(in)} {
			s := markScanner{marker: []byte(marker)}
			var got strings.Builder
			for i := 0; i < len(in); i += size {
				for _, p := range s.feed([]byte(in[i:min(i+size, len(in))])) {
					if p.mark {
						got.WriteString("<MARK>")
						continue
					}
					if !strings.Contains(in, string(p.text)) || strings.ContainsRune(string(p.text), '\uFFFD') {
						t.Errorf("%q in chunks of %d: piece %q is cut", in, size, p.text)
					}
					got.Write(p.text)
				}
			}
			got.Write(s.buf) // what is held back at the end
			if want := strings.ReplaceAll(in, marker, "<MARK>"); got.String() != want {
				t.Errorf("%q in chunks of %d: got %q, want %q", in, size, got.String(), want)
			}
		}
	}
}

// TestAnsiQuote checks that bash reads every byte back as sent.
func TestAnsiQuote(t *testing.T) {
	in := "it's a \\ \"test\"\n\ttab é $HOME `x`"
	out, err := exec.Command("/bin/bash", "-c", "printf '%s' "+ansiQuote(in)).Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != in {
		t.Errorf("bash read %q, want %q", out, in)
	}
}
