package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Usage is the help of the stdio server.
const Usage = `usage: msgmesh mcp

Serves MsgMesh's MCP tools over stdio (JSON-RPC on stdin/stdout) for an MCP
client such as Claude Code. Environment:

  MQ_API_KEY  the MsgMesh API key (or token) the tools act with (required)
  MQ_URL      the MsgMesh API (default http://127.0.0.1:8080)

Logs go to stderr. See sdks/mcp-server/README.md.
`

// Main runs the stdio server as a command: env is looked up with getenv,
// the protocol runs on stdin/stdout, logs and usage go to stderr. It
// returns the exit code.
func Main(args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer, version string) int {
	for _, a := range args {
		switch a {
		case "-h", "--help", "help":
			fmt.Fprint(stdout, Usage)
			return 0
		case "-v", "--version", "version":
			fmt.Fprintln(stdout, "msgmesh mcp", version)
			return 0
		default:
			fmt.Fprintf(stderr, "msgmesh mcp: unexpected argument %q\n\n%s", a, Usage)
			return 2
		}
	}
	key := getenv("MQ_API_KEY")
	if key == "" {
		fmt.Fprint(stderr, "msgmesh mcp: MQ_API_KEY is required (a MsgMesh API key or token)\n\n"+Usage)
		return 2
	}
	url := getenv("MQ_URL")
	if url == "" {
		url = "http://127.0.0.1:8080"
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := New(Config{URL: url, APIKey: key, Logger: log, Version: version})
	if err != nil {
		fmt.Fprintf(stderr, "msgmesh mcp: %v\n", err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err = s.Run(ctx, &mcp.IOTransport{Reader: nopCloser{stdin}, Writer: nopWriteCloser{stdout}})
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		fmt.Fprintf(stderr, "msgmesh mcp: %v\n", err)
		return 1
	}
	return 0
}

type nopCloser struct{ io.Reader }

func (nopCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
