package mcp

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource URIs.
const (
	// SessionSandboxesURI lists the sandboxes the reading session claimed.
	SessionSandboxesURI = "paddock://session/sandboxes"
	// NamespaceSandboxesURI lists every sandbox of the allowed pools in the server's namespace.
	NamespaceSandboxesURI = "paddock://namespace/sandboxes"
)

func (s *Server) addResources() {
	s.mcp.AddResource(&mcp.Resource{URI: SessionSandboxesURI, Name: "session-sandboxes", Title: "This session's sandboxes",
		Description: "The sandboxes this MCP session claimed, with their state (JSON, like list_sandboxes).",
		MIMEType:    "application/json"}, s.readSandboxes(true))
	s.mcp.AddResource(&mcp.Resource{URI: NamespaceSandboxesURI, Name: "namespace-sandboxes", Title: "The namespace's sandboxes",
		Description: fmt.Sprintf("Every sandbox in namespace %q from the pools this server serves (JSON, like list_sandboxes with all=true).", s.cfg.Namespace),
		MIMEType:    "application/json"}, s.readSandboxes(false))
}

func (s *Server) readSandboxes(sessionOnly bool) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		list, err := s.sandboxes(ctx, req.Session, sessionOnly)
		if err != nil {
			return nil, err
		}
		data, err := json.Marshal(SandboxList{Sandboxes: list})
		if err != nil {
			return nil, err
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(data)}}}, nil
	}
}
