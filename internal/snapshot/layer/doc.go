// Package layer turns what a container wrote into one OCI image layer (an uncompressed tar with
// OCI whiteouts), reading a hostile tree safely. The tree's owner is the code inside a sandbox,
// so nothing in it is trusted:
//
//   - No link is followed: every file is opened relative to its parent directory's descriptor
//     with O_NOFOLLOW, and must still be the inode that was listed; symlinks are recorded, never
//     resolved, and hard links point only at paths already written to the same layer.
//   - Nothing blocks: FIFOs are recorded as FIFOs without being opened, sockets are skipped,
//     device nodes other than overlay whiteouts (character 0:0) fail the capture.
//   - Nothing grows without bound: a byte budget counts each file's apparent size before it is
//     read (a sparse file of a terabyte fails at once), and entries and depth are capped.
//   - Names with "/", "." or "..", or starting with the OCI whiteout prefix ".wh.", fail the
//     capture, so no entry can land outside the layer or delete a file it did not delete.
//   - A file whose size or modification time changes while it is copied fails the capture
//     (the caller pauses the container first; this catches what the pause did not stop).
//
// FromUpperDir reads an overlayfs upper directory (runc with containerd's overlayfs
// snapshotter); FromOverlayTar converts a tar in the same convention (runsc tar rootfs-upper).
package layer
