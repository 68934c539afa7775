package shlex

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The expectations were produced with Python 3's shlex.split.
func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  error
	}{
		{in: "", want: []string{}},
		{in: "   ", want: []string{}},
		{in: "echo hello", want: []string{"echo", "hello"}},
		{in: "  echo \t hello\n", want: []string{"echo", "hello"}},
		{in: `echo 'a b' "c d"`, want: []string{"echo", "a b", "c d"}},
		{in: `a'b'c"d"e`, want: []string{"abcde"}},
		{in: `echo ''`, want: []string{"echo", ""}},
		{in: `echo a\ b`, want: []string{"echo", "a b"}},
		{in: `echo "a\"b" "c\\d" "e\nf"`, want: []string{"echo", `a"b`, `c\d`, `e\nf`}},
		{in: `echo 'a\b'`, want: []string{"echo", `a\b`}},
		{in: `sh -c 'echo $HOME | wc'`, want: []string{"sh", "-c", "echo $HOME | wc"}},
		{in: `echo # not a comment`, want: []string{"echo", "#", "not", "a", "comment"}},
		{in: `echo "héllo wörld"`, want: []string{"echo", "héllo wörld"}},
		{in: `echo 'open`, err: ErrNoClosingQuote},
		{in: `echo "open`, err: ErrNoClosingQuote},
		{in: `echo \`, err: ErrNoEscaped},
	}
	for _, tc := range cases {
		got, err := Split(tc.in)
		if !errors.Is(err, tc.err) {
			t.Errorf("Split(%q) error = %v, want %v", tc.in, err, tc.err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); tc.err == nil && diff != "" {
			t.Errorf("Split(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}
