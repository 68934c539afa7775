package snapshot

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestResultRoundTrip(t *testing.T) {
	for _, want := range []Result{
		{Image: "registry.local/ns/snap@sha256:" + strings.Repeat("a", 64), SizeBytes: 10, PausedMilliseconds: 3},
		{Error: "pausing container abc: not found", PausedMilliseconds: 0},
	} {
		got, err := ParseResult(string(want.Encode()))
		if err != nil {
			t.Fatalf("ParseResult(%+v): %v", want, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("round trip (-want +got):\n%s", d)
		}
	}
}

func TestEncodeFitsTerminationMessage(t *testing.T) {
	b := Result{Error: strings.Repeat("x", 3*MaxResultBytes)}.Encode()
	if len(b) > MaxResultBytes {
		t.Fatalf("encoded result is %d bytes, more than %d", len(b), MaxResultBytes)
	}
	if _, err := ParseResult(string(b)); err != nil {
		t.Fatalf("a cut result does not parse: %v", err)
	}
}

func TestParseResultRefuses(t *testing.T) {
	for name, msg := range map[string]string{
		"empty":        "  ",
		"not JSON":     "panic: runtime error",
		"unknown key":  `{"image":"r/x@sha256:ab","extra":1}`,
		"no digest":    `{"image":"r/x:latest"}`,
		"empty object": `{}`,
	} {
		if _, err := ParseResult(msg); err == nil {
			t.Errorf("%s: ParseResult(%q) accepted it", name, msg)
		}
	}
}
