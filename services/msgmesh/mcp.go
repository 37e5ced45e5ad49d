package main

import (
	"io"
	"os"

	"github.com/msgmesh/msgmesh/services/mcp"
)

// mcpCommand is `msgmesh mcp`: the stdio MCP server (env MQ_API_KEY,
// MQ_URL); see services/mcp.
func mcpCommand(args []string, stdout, stderr io.Writer) int {
	return mcp.Main(args, os.Getenv, os.Stdin, stdout, stderr, Version)
}
