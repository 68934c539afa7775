package naming

import "testing"

func TestNameHash(t *testing.T) {
	// The first three are published FNV-1a 32-bit test vectors; the last was computed
	// independently and starts with zeros, which must be kept.
	tests := []struct {
		in, want string
	}{
		{in: "", want: "811c9dc5"},
		{in: "a", want: "e40c292c"},
		{in: "foobar", want: "bf9cf968"},
		{in: "sb-1141", want: "00106f32"},
	}
	for _, tt := range tests {
		if got := NameHash(tt.in); got != tt.want {
			t.Errorf("NameHash(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
