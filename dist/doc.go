// Package dist embeds the install bundle that `make dist` renders from config/, so the installed
// paddock binary can uninstall exactly what dist/paddock.yaml installs without a source checkout.
// `make dist` rewrites only the yaml files; this package's Go files are hand-written.
package dist
