package e2b

// Keys of the objects the front door reads and writes. The front door owns them; nothing else
// in the tree spells them.
const (
	// SandboxLabel ("true") marks a SandboxClaim made by the front door: only such claims are E2B
	// sandboxes, listed, routed and killed through it.
	SandboxLabel = "e2b.paddock.dev/sandbox"
	// MetadataAnnotation holds the sandbox's E2B metadata as a JSON object. Metadata keys and
	// values are free text, so they fit neither label keys nor label values.
	MetadataAnnotation = "e2b.paddock.dev/metadata"
	// TemplateAnnotation holds the templateID the sandbox was created from (a pool name or alias).
	TemplateAnnotation = "e2b.paddock.dev/template-id"
	// TemplateLabel on a SandboxWarmPool makes the pool serve that templateID besides its own
	// name, e.g. e2b.paddock.dev/template=base.
	TemplateLabel = "e2b.paddock.dev/template"
	// APIKeyNamespaceLabel on a Secret in the API-key namespace makes the Secret an API key bound
	// to the namespace the label names.
	APIKeyNamespaceLabel = "e2b.paddock.dev/api-key-namespace"
	// DefaultAPIKeyNamespace holds the API-key Secrets unless --e2b-api-key-namespace says
	// otherwise. It holds nothing else: the router lists and watches every Secret there.
	DefaultAPIKeyNamespace = "paddock-e2b"
	// APIKeyDataKey is the data key of the API key in such a Secret.
	APIKeyDataKey = "api-key"
	// ClaimNameIndex indexes front-door claims by name (the sandbox ID) across namespaces.
	ClaimNameIndex = "e2b.paddock.dev/claim-name"
)

// APIKeyPrefix starts every key the front door mints, as E2B's keys start with "e2b_", so a
// leaked key is recognisable in logs and by secret scanners.
const APIKeyPrefix = "pdk_e2b_"

// DefaultPort is the E2B listener's port in the install bundles (--e2b-bind-address=:3000).
const DefaultPort = 3000

// NetworkAnnotation holds, on a front-door claim, the E2B network configuration (JSON) as the
// create call or the last network update gave it, for getInfo; the policy the node enforces is
// the claim's api/egress.PolicyAnnotation.
const NetworkAnnotation = "e2b.paddock.dev/network"

// RulesSecretAnnotation names, on a front-door claim, the Secret the front door wrote with the
// claim's network.rules header values (the one a network update replaces and deletes). A fork
// does not inherit it: its policy reads its source's Secret, which only the source's updates
// delete.
const RulesSecretAnnotation = "e2b.paddock.dev/rules-secret"

// AllowInternetAccessAnnotation holds create's allow_internet_access ("true" or "false") when it
// was given.
const AllowInternetAccessAnnotation = "e2b.paddock.dev/allow-internet-access"

// Labels of the SandboxSnapshots the front door makes (createSnapshot and fork).
const (
	// SnapshotLabel ("true") marks a SandboxSnapshot made by the front door: only those are E2B
	// snapshots, listed, started from and deleted through it.
	SnapshotLabel = "e2b.paddock.dev/snapshot"
	// SnapshotSourceLabel holds the sandbox ID the snapshot was taken of (listSnapshots'
	// sandboxID filter).
	SnapshotSourceLabel = "e2b.paddock.dev/source-sandbox"
	// SnapshotAliasLabel and SnapshotTagLabel hold the name the snapshot was given
	// (createSnapshot's name); an unnamed snapshot has a generated alias and no SnapshotNamedLabel.
	SnapshotAliasLabel = "e2b.paddock.dev/snapshot-alias"
	SnapshotTagLabel   = "e2b.paddock.dev/snapshot-tag"
	// SnapshotNamedLabel ("true") marks a snapshot created with a name.
	SnapshotNamedLabel = "e2b.paddock.dev/snapshot-named"
	// ForkLabel ("true") marks the snapshot a fork took; listSnapshots does not show it, and it
	// is deleted with the last of its forks (their claims own it).
	ForkLabel = "e2b.paddock.dev/fork"
)
