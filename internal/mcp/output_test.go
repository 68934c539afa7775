package mcp

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestCappedBufferKeepsTheStartAndMarksTheRest(t *testing.T) {
	tests := []struct {
		name      string
		writes    []string
		want      string
		truncated bool
	}{
		{"under the limit", []string{"ab", "c"}, "abc", false},
		{"exactly the limit", []string{"abcd"}, "abcd", false},
		{"across writes", []string{"ab", "cdef", "gh"}, "abcd\n[paddock: output truncated: 4 more bytes not shown; redirect the output to a file and read parts of it]\n", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newCappedBuffer(4)
			for _, w := range tc.writes {
				if n, err := b.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want the whole write accepted", w, n, err)
				}
			}
			if got := b.String(); got != tc.want || b.Truncated() != tc.truncated {
				t.Errorf("String() = %q, Truncated() = %v; want %q, %v", got, b.Truncated(), tc.want, tc.truncated)
			}
		})
	}
}

func TestBearerAuth(t *testing.T) {
	h := BearerAuth("tok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for header, want := range map[string]int{
		"":              http.StatusUnauthorized,
		"tok":           http.StatusUnauthorized,
		"Bearer":        http.StatusUnauthorized,
		"Bearer tok2":   http.StatusUnauthorized,
		"Basic dG9rOg=": http.StatusUnauthorized,
		"Bearer tok":    http.StatusNoContent,
	} {
		r := httptest.NewRequest(http.MethodPost, HTTPPath, nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != want {
			t.Errorf("Authorization %q: HTTP %d, want %d", header, w.Code, want)
		}
	}
}
