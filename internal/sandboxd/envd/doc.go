// Package envd serves E2B's in-sandbox daemon protocol ("envd") from sandboxd, so that the
// unmodified E2B SDKs run commands and move files in a Paddock sandbox: the Connect services
// process.Process and filesystem.Filesystem (JSON codec, HTTP/1.1 and h2c) and the REST
// endpoints GET/POST /files and GET /health.
//
// It owns no processes and no files of its own: commands run through sandboxd's process manager
// and every path goes through the sandbox root's confinement (pathsafe). What it adds is E2B's
// view of them: processes outlive a dropped stream and die at their Connect-Timeout-Ms, several
// clients may follow one process (Connect), and paths are seen from the user's home directory,
// which is the sandbox root. The wire facts and what is not served are in docs/compatibility.md.
package envd
