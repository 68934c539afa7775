package claim

import (
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		s    Settings
		want string // "" means valid
	}{
		{name: "minimal", s: Settings{ClaimUID: "u"}},
		{name: "full", s: Settings{ClaimUID: "u", Env: []EnvVar{{Name: "A", Value: "x=y"}}, Files: []File{{Path: "f", Mode: "0600"}}}},
		{name: "no uid", s: Settings{ClaimName: "c"}, want: "claimUID is required"},
		{name: "empty env name", s: Settings{ClaimUID: "u", Env: []EnvVar{{Name: ""}}}, want: "env[0].name"},
		{name: "equals in name", s: Settings{ClaimUID: "u", Env: []EnvVar{{Name: "A"}, {Name: "B=C"}}}, want: "env[1].name \"B=C\""},
		{name: "nul in value", s: Settings{ClaimUID: "u", Env: []EnvVar{{Name: "A", Value: "a\x00"}}}, want: "env[0].value"},
		{name: "file without path", s: Settings{ClaimUID: "u", Files: []File{{}}}, want: "files[0].path is required"},
		{name: "bad mode", s: Settings{ClaimUID: "u", Files: []File{{Path: "f", Mode: "644"}}}, want: "files[0].mode \"644\""},
	}
	for _, tc := range cases {
		err := tc.s.Validate()
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Validate() = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
