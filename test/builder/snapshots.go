package builder

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	snapshotsv1alpha1 "github.com/paddock-dev/paddock/api/snapshots/v1alpha1"
)

// SnapshotWrapper builds a SandboxSnapshot.
type SnapshotWrapper struct {
	s snapshotsv1alpha1.SandboxSnapshot
}

// MakeSnapshot returns a SandboxSnapshot of the Sandbox named sandbox.
func MakeSnapshot(name, namespace, sandbox string) *SnapshotWrapper {
	return &SnapshotWrapper{s: snapshotsv1alpha1.SandboxSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec:       snapshotsv1alpha1.SandboxSnapshotSpec{SandboxName: sandbox},
	}}
}

// Obj returns a copy of the SandboxSnapshot built so far.
func (w *SnapshotWrapper) Obj() *snapshotsv1alpha1.SandboxSnapshot { return w.s.DeepCopy() }

// Container sets spec.containerName.
func (w *SnapshotWrapper) Container(name string) *SnapshotWrapper {
	w.s.Spec.ContainerName = name
	return w
}

// Template sets spec.templateName.
func (w *SnapshotWrapper) Template(name string) *SnapshotWrapper {
	w.s.Spec.TemplateName = name
	return w
}
