// Command msgmesh-mcp is MsgMesh's stdio MCP server alone: the same server
// as `msgmesh mcp`, without the broker, HTTP and Kafka code, so that the
// npm package @msgmesh/mcp-server carries a small binary per platform.
//
//	MQ_API_KEY=mm_... [MQ_URL=http://127.0.0.1:8080] msgmesh-mcp
package main

import (
	"os"

	"github.com/msgmesh/msgmesh/services/mcp"
)

// Version is set at build time (-ldflags "-X main.Version=...").
var Version = "dev"

func main() {
	os.Exit(mcp.Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr, Version))
}
