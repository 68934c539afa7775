package dist

import _ "embed"

// Bundle is dist/paddock.yaml: the core and extensions install bundle, one object per document.
//
//go:embed paddock.yaml
var Bundle []byte

// RouterBundle is dist/paddock-router.yaml: paddock-router (allow-all; see config/router for the
// authorization components), applied after Bundle.
//
//go:embed paddock-router.yaml
var RouterBundle []byte

// SnapshotsBundle is dist/paddock-snapshots.yaml: the opt-in snapshot install (the privileged
// capture namespace, the snapshot image admission policy and its parameters), applied after
// Bundle.
//
//go:embed paddock-snapshots.yaml
var SnapshotsBundle []byte

// EgressBundle is dist/paddock-egress.yaml: paddock-egress, the node component that enforces
// sandboxes' egress policies (opt-in, applied after Bundle).
//
//go:embed paddock-egress.yaml
var EgressBundle []byte
