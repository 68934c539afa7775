// Package mcp is `paddock mcp`: a Model Context Protocol server that gives an MCP client (an
// agent runtime) Paddock sandboxes as tools, on top of the Go SDK (sdk/).
//
// The server is fixed at start to one namespace and, optionally, a set of warm pools; no tool
// input reaches beyond them. Tools claim, list, inspect, suspend, resume and delete sandboxes,
// run commands and move files, and run code in the sandbox's code interpreter (run_code: text
// results, and charts as PNG image content); every path goes to sandboxd, which confines it to the sandbox
// root. Failures are tool errors (isError results) whose text says what to do next. Sandboxes a
// session claims carry its id in extensionsv1beta1.MCPSessionLabel and are deleted when the
// session ends, unless Config.KeepSandboxes. Transports: stdio, and streamable HTTP behind a
// bearer token (BearerAuth).
package mcp
