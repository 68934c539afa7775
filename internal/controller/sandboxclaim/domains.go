package sandboxclaim

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/paddock-dev/paddock/internal/blueprint"
)

// AllowedLabelDomainsFile is where the reference reads the label allow-list from (ConfigMap
// agent-sandbox-config, mounted optionally).
const AllowedLabelDomainsFile = "/etc/sandbox-config/allowed-label-domains"

// LoadAllowedLabelDomains reads the label allow-list for Options.AllowedLabelDomains. A missing
// file yields nil (the default list applies); any other read error is returned.
func LoadAllowedLabelDomains(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the allowed label domains from %s: %w", path, err)
	}
	return blueprint.ParseAllowedLabelDomains(string(b)), nil
}
