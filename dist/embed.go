package dist

import _ "embed"

// Bundle is dist/paddock.yaml: the core and extensions install bundle, one object per document.
//
//go:embed paddock.yaml
var Bundle []byte
