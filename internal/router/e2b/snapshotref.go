package e2b

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	e2bapi "github.com/paddock-dev/paddock/api/e2b"
	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

// How E2B's snapshot names and IDs map to SandboxSnapshot objects. Pure: no client, no I/O.
//
// A snapshot is named alias:tag in its namespace (E2B's team). Its SandboxSnapshot, and the
// SandboxWarmPool that starts sandboxes from it, are named alias--tag: an alias and a tag hold no
// "--", so no two names meet, and the pool's members stay DNS labels. An unnamed snapshot gets
// a fresh sandbox-style ID as its alias and the tag "default", so its snapshot ID is
// "<id>:default" as on E2B; a named one's is "<namespace>/<alias>:<tag>".

// snapshotRef is one snapshot of a namespace, by alias and tag.
type snapshotRef struct{ alias, tag string }

// snapshotPart is an alias or a tag: lower-case letters and digits in words joined by single '-'.
var snapshotPart = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// memberSuffix is what a pool adds to its name for a member ("-" and 5 characters).
const memberSuffix = 6

// maxSnapshotName bounds alias--tag so that the pool's members' names stay DNS labels.
const maxSnapshotName = validation.DNS1035LabelMaxLength - memberSuffix

// objectName is the SandboxSnapshot (and SandboxWarmPool) of the snapshot.
func (s snapshotRef) objectName() string { return s.alias + "--" + s.tag }

// isSnapshotObjectName reports whether s is an objectName (listSnapshots' page cursor).
func isSnapshotObjectName(s string) bool {
	alias, tag, found := strings.Cut(s, "--")
	return found && snapshotPart.MatchString(alias) && snapshotPart.MatchString(tag)
}

// parseSnapshotName reads createSnapshot's name in ns: "alias", "alias:tag" or
// "namespace/alias:tag", or an error naming the field and the fix.
func parseSnapshotName(name, ns string) (snapshotRef, error) {
	rest := name
	if team, after, found := strings.Cut(name, "/"); found {
		if team != ns {
			return snapshotRef{}, fmt.Errorf("name %q: snapshots are named in the API key's namespace %q, not %q; leave the prefix out or write %s/", name, ns, team, ns)
		}
		rest = after
	}
	alias, tag, found := strings.Cut(rest, ":")
	if !found {
		tag = e2bapi.DefaultSnapshotTag
	}
	for _, part := range []struct{ what, v string }{{"alias", alias}, {"tag", tag}} {
		if !snapshotPart.MatchString(part.v) {
			return snapshotRef{}, fmt.Errorf("name %q: the %s %q must be lower-case letters and digits, words joined by single '-' (e.g. my-snap:v2)", name, part.what, part.v)
		}
	}
	ref := snapshotRef{alias: alias, tag: tag}
	if n := len(ref.objectName()); n > maxSnapshotName {
		return snapshotRef{}, fmt.Errorf("name %q: alias and tag together are %d characters, over the %d allowed; shorten them", name, n-2, maxSnapshotName-2)
	}
	return ref, nil
}

// parseSnapshotID reads a snapshot ID (create's templateID, deleteSnapshot's template ID) in ns.
// ok is false when id cannot name a snapshot of ns: another namespace's, or no snapshot's shape.
// Both are answered as not found: a key learns nothing of other namespaces.
func parseSnapshotID(id, ns string) (ref snapshotRef, ok bool) {
	ref, err := parseSnapshotName(id, ns)
	return ref, err == nil
}

// parseSnapshotFilter reads listSnapshots' name filter in ns: "alias", "alias:tag", with or
// without "namespace/"; an empty tag matches every tag, an empty name every snapshot. ok is
// false when the filter can match no snapshot of ns.
func parseSnapshotFilter(name, ns string) (alias, tag string, ok bool) {
	if name == "" {
		return "", "", true
	}
	ref, err := parseSnapshotName(name, ns)
	if err != nil {
		return "", "", false
	}
	if !strings.Contains(name, ":") {
		ref.tag = ""
	}
	return ref.alias, ref.tag, true
}

// isSnapshotID reports whether id can only be a snapshot ID (it has a tag or a namespace), as
// opposed to a template ID that a pool may serve.
func isSnapshotID(id string) bool { return strings.ContainsAny(id, ":/") }

// snapshotInfo is a front-door snapshot as createSnapshot and listSnapshots answer it.
func snapshotInfo(s *snapshotsv1alpha1.SandboxSnapshot) e2bapi.SnapshotInfo {
	alias, tag := s.Labels[e2bapi.SnapshotAliasLabel], s.Labels[e2bapi.SnapshotTagLabel]
	if s.Labels[e2bapi.SnapshotNamedLabel] != "true" {
		return e2bapi.SnapshotInfo{SnapshotID: alias + ":" + tag, Names: []string{}}
	}
	name := s.Namespace + "/" + alias
	return e2bapi.SnapshotInfo{SnapshotID: name + ":" + tag, Names: []string{name}}
}
