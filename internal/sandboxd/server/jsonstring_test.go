package server

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestWriteLegacyExecuteResponseMatchesEncodingJSON: the streamed body is what encoding/json
// makes of the same response.
func TestWriteLegacyExecuteResponseMatchesEncodingJSON(t *testing.T) {
	for _, out := range []string{"", "plain text\n", "quote \" backslash \\ tab \t cr \r nul \x00 bell \x07 del \x7f",
		"<html>&amp;</html>", "ünïcødé 日本 😀", "bad utf8 \xff\xfe end", "sep \u2028 \u2029", "truncated \xe6\x97"} {
		var got bytes.Buffer
		if err := writeLegacyExecuteResponse(&got, []byte(out), []byte(out+"!"), 3); err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(legacyExecuteResponse{Stdout: out, Stderr: out + "!", ExitCode: 3}); err != nil {
			t.Fatal(err)
		}
		var g, w legacyExecuteResponse
		if err := json.Unmarshal(got.Bytes(), &g); err != nil {
			t.Fatalf("%q: streamed body is not JSON: %v\n%s", out, err, got.String())
		}
		if err := json.Unmarshal(want.Bytes(), &w); err != nil {
			t.Fatal(err)
		}
		if g != w {
			t.Errorf("%q: streamed %+v, encoding/json %+v", out, g, w)
		}
	}
}
