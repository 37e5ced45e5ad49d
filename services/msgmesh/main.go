// Command msgmesh runs MsgMesh: any set of its targets under one lifecycle.
//
//	msgmesh serve [--target=all] [--config file] [--http.addr ...] [--verify-config] [--list-targets]
//	msgmesh genkey | keys create|list|revoke | token (operator.go)
//	msgmesh version
//
// Configuration: flags > MSGMESH_* environment > config file > defaults
// (key http.addr ↔ MSGMESH_HTTP_ADDR ↔ --http.addr). See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/msgmesh/msgmesh/platform/config"
	"github.com/msgmesh/msgmesh/platform/keyring"
	"github.com/msgmesh/msgmesh/platform/logging"
	"github.com/msgmesh/msgmesh/services/msgmesh/app"
)

// Version is set at build time (-ldflags "-X main.Version=...").
var Version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

const usage = `usage: msgmesh serve [flags]      run MsgMesh (msgmesh serve --help lists every setting)
       msgmesh genkey             print a fresh mm_ key (for MSGMESH_BOOTSTRAP_ADMIN_KEY)
       msgmesh keys create|list|revoke   manage API keys on a running node (msgmesh keys --help)
       msgmesh token              mint a short-lived token on a running node (msgmesh token --help)
       msgmesh secrets new-key FILE | key-id FILE   make or identify a key-encryption key (secrets.key_file)
       msgmesh mcp                the MCP server over stdio (env MQ_API_KEY, MQ_URL)
       msgmesh version`

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	if code, ok := operatorCommand(args, stdout, stderr); ok {
		return code
	}
	switch args[0] {
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "msgmesh", Version)
		return 0
	case "serve":
		return serve(args[1:], stdout, stderr)
	case "secrets":
		return secrets(args[1:], stdout, stderr)
	case "mcp":
		return mcpCommand(args[1:], stdout, stderr)
	case "help", "--help", "-h":
		fmt.Fprintln(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "msgmesh: unknown command %q (want serve, genkey, keys, token, secrets, mcp or version)\n", args[0])
	return 2
}

// secrets makes and identifies key-encryption keys (secrets.key_file):
// "new-key FILE" writes a fresh key (mode 0600, never over an existing
// file) and prints its id; "key-id FILE" prints a key file's id, to match
// the id a node names when it lacks a key.
func secrets(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || (args[0] != "new-key" && args[0] != "key-id") {
		fmt.Fprintln(stderr, "usage: msgmesh secrets new-key FILE | msgmesh secrets key-id FILE")
		return 2
	}
	var key []byte
	var err error
	if args[0] == "new-key" {
		if _, serr := os.Stat(args[1]); serr == nil {
			fmt.Fprintf(stderr, "msgmesh: %s exists; not overwriting a key\n", args[1])
			return 1
		}
		key, _, err = keyring.LoadOrCreateFile(args[1])
	} else {
		key, err = keyring.LoadFile(args[1])
	}
	if err != nil {
		fmt.Fprintf(stderr, "msgmesh: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, keyring.KeyID(key))
	return 0
}

func serve(args []string, stdout, stderr io.Writer) int {
	fs, target, listTargets, verify, cfgFile := serveFlags()
	fs.SetOutput(stderr)
	fs.Usage = func() { serveUsage(stdout, fs) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "msgmesh serve: %v (see msgmesh serve --help)\n", err)
		return 2
	}
	targets := strings.Split(*target, ",")
	if _, err := app.Resolve(targets); err != nil {
		fmt.Fprintf(stderr, "msgmesh: %v\n", err)
		return 2
	}
	if *listTargets {
		fmt.Fprint(stdout, app.TargetList())
		return 0
	}
	unknown := unknownEnv(os.Environ())
	cfg, err := load(fs, *cfgFile)
	if err != nil {
		fmt.Fprintf(stderr, "msgmesh: invalid configuration:\n%v\n", indent(err))
		for _, u := range unknown {
			fmt.Fprintf(stderr, "msgmesh: warning: %s\n", u)
		}
		return 2
	}
	if *verify {
		for _, u := range unknown {
			fmt.Fprintf(stderr, "msgmesh: warning: %s\n", u)
		}
		fmt.Fprintf(stdout, "configuration OK\n%s", describe(cfg))
		return 0
	}
	log := newLogger(cfg.Log, stderr)
	for _, u := range unknown {
		log.Warn("unknown environment variable: " + u)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	startCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	a, err := app.New(startCtx, cfg, targets, log)
	cancel()
	if err != nil {
		log.Error("msgmesh failed to start", "err", err)
		return 1
	}
	if err := a.Run(ctx); err != nil {
		log.Error("msgmesh stopped on error", "err", err)
		return 1
	}
	log.Info("msgmesh stopped")
	return 0
}

func indent(err error) string {
	return "  " + strings.ReplaceAll(err.Error(), "\n", "\n  ")
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	return logging.New(c.Level, c.Format, w)
}
