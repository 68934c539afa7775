package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMCPOptionsValidate(t *testing.T) {
	dir := t.TempDir()
	tokenFile, emptyFile := filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	if err := os.WriteFile(tokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		mutate    func(*MCPOptions)
		env       string
		wantToken string
		wantErr   string
	}{
		{name: "stdio needs no token", mutate: func(*MCPOptions) {}},
		{name: "listen without a token", mutate: func(o *MCPOptions) { o.Listen = ":8090" }, wantErr: "--listen needs a bearer token"},
		{name: "listen with the env token", mutate: func(o *MCPOptions) { o.Listen = ":8090" }, env: "from-env", wantToken: "from-env"},
		{name: "the token file wins over the env", mutate: func(o *MCPOptions) { o.Listen, o.TokenFile = ":8090", tokenFile }, env: "from-env", wantToken: "from-file"},
		{name: "empty token file", mutate: func(o *MCPOptions) { o.Listen, o.TokenFile = ":8090", emptyFile }, wantErr: "is empty"},
		{name: "missing token file", mutate: func(o *MCPOptions) { o.Listen, o.TokenFile = ":8090", filepath.Join(dir, "nope") }, wantErr: "--token-file"},
		{name: "unauthenticated on request", mutate: func(o *MCPOptions) { o.Listen, o.AllowUnauthenticated = ":8090", true }},
		{name: "unauthenticated and a token", mutate: func(o *MCPOptions) { o.Listen, o.AllowUnauthenticated = ":8090", true }, env: "x", wantErr: "pick one"},
		{name: "token flags without listen", mutate: func(o *MCPOptions) { o.TokenFile = tokenFile }, wantErr: "apply to --listen only"},
		{name: "empty pool name", mutate: func(o *MCPOptions) { o.Pools = []string{"a", ""} }, wantErr: "--pools"},
		{name: "zero output limit", mutate: func(o *MCPOptions) { o.MaxOutputBytes = 0 }, wantErr: "--max-output-bytes 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &MCPOptions{MaxOutputBytes: 1, MaxReadBytes: 1}
			tc.mutate(o)
			token, err := o.Validate(func(k string) string {
				if k == MCPTokenEnv {
					return tc.env
				}
				return ""
			})
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			case tc.wantErr == "" && (err != nil || token != tc.wantToken):
				t.Errorf("Validate() = %q, %v; want %q", token, err, tc.wantToken)
			}
		})
	}
}
