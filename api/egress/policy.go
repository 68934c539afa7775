package egress

// PolicyAnnotation holds a Policy as JSON. On a SandboxTemplate it applies to every Sandbox of
// the template; on a SandboxClaim it replaces the template's whole; on a Sandbox and its Pod it
// is the effective policy the node enforces. Absent means no policy: the managed NetworkPolicy
// alone, as before.
const PolicyAnnotation = "paddock.dev/egress"

// TrustCAAnnotation set to "true" in a pod template's annotations makes its Pods trust the
// installation's egress CA though they carry no policy: a warm member whose policy, with inject
// rules, comes only with its claim (E2B network.rules) then serves those rules over HTTPS. A Pod
// with a policy trusts the CA without it.
const TrustCAAnnotation = "paddock.dev/trust-egress-ca"

// AllTraffic is the deny entry that denies every address allow does not name.
const AllTraffic = "0.0.0.0/0"

// Policy says where a sandbox may connect. A connection is decided in this order: the
// always-denied ranges (the cluster's own, private, link-local, loopback) refuse; a host name
// matching Allow whose address is one that name resolves to allows; an address in Allow allows;
// an address in Deny refuses; anything else is allowed.
type Policy struct {
	// allow lists domains ("example.com"), wildcards ("*.example.com" for every subdomain at any
	// depth, not the apex; "*" for every name), IPv4 addresses and IPv4 CIDRs.
	// +optional
	Allow []string `json:"allow,omitempty"`
	// deny lists IPv4 addresses and CIDRs. "0.0.0.0/0" denies everything allow does not name.
	// +optional
	Deny []string `json:"deny,omitempty"`
	// inject adds or replaces HTTP headers on requests to a domain, over HTTP and HTTPS.
	// +optional
	Inject []InjectRule `json:"inject,omitempty"`
}

// InjectRule is the headers one domain gets.
type InjectRule struct {
	// domain is a host name ("api.example.com") or a wildcard ("*.example.com"). An exact domain
	// takes precedence over wildcards, and a longer wildcard over a shorter one.
	// +required
	Domain string `json:"domain"`
	// headers are set on every request to the domain, replacing any value the sandbox sent.
	// +required
	Headers []Header `json:"headers"`
}

// Header is one header an InjectRule sets.
type Header struct {
	// name is the header's name, e.g. "Authorization".
	// +required
	Name string `json:"name"`
	// secretKeyRef names the Secret, in the sandbox's namespace, and the key whose value is the
	// header's whole value (e.g. "Bearer sk-...").
	// +required
	SecretKeyRef SecretKeyRef `json:"secretKeyRef"`
}

// SecretKeyRef is a key of a Secret in the sandbox's namespace.
type SecretKeyRef struct {
	// name is the Secret's name.
	// +required
	Name string `json:"name"`
	// key is the key in the Secret's data.
	// +required
	Key string `json:"key"`
}

// PolicedLabel is set to "true" by the Sandbox controller on every Pod whose pod template carries
// PolicyAnnotation, and removed from the others. Where paddock-egress is installed
// (--sandbox-egress-proxy-ports), a Managed template's default NetworkPolicy leaves such Pods out
// and a second one admits their egress to the egress ports only: a policed Pod whose traffic the
// node does not redirect (paddock-egress down when it started, or not yet reconciled) reaches
// nothing, instead of the internet.
const PolicedLabel = "paddock.dev/egress-policed"

// StatusAnnotation is written on a policed Pod by the egress component of its node: a Status,
// as JSON, saying whether the Pod's policy is in force. The Sandbox controller turns it into
// the Sandbox's EgressPolicy condition.
const StatusAnnotation = "paddock.dev/egress-status"

// Status is the outcome of applying one policy to a Pod.
type Status struct {
	// policy identifies the PolicyAnnotation value this status is about (egresspolicy.Hash).
	// +required
	Policy string `json:"policy"`
	// applied says whether that policy is in force.
	// +required
	Applied bool `json:"applied"`
	// message says why not, and which policy is in force instead.
	// +optional
	Message string `json:"message,omitempty"`
}
