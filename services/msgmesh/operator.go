package main

// Operator commands: msgmesh genkey, msgmesh keys create|list|revoke and
// msgmesh token. genkey works offline; the others call a running node's
// HTTP API (--url or MSGMESH_URL) with a key (--key or MSGMESH_KEY).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/msgmesh/msgmesh/platform/auth"
)

const defaultURL = "http://127.0.0.1:8080"

// operatorCommand runs the operator command args[0] names; ok is false when
// args[0] is not one of them.
func operatorCommand(args []string, stdout, stderr io.Writer) (code int, ok bool) {
	switch args[0] {
	case "genkey":
		return genkey(args[1:], stdout, stderr), true
	case "keys":
		return keys(args[1:], stdout, stderr), true
	case "token":
		return token(args[1:], stdout, stderr), true
	}
	return 0, false
}

// genkey prints a fresh API key, made by the same generator as the keys the
// server issues (256 random bits): fit for MSGMESH_BOOTSTRAP_ADMIN_KEY.
func genkey(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("genkey", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: msgmesh genkey\n\nPrints a fresh MsgMesh key (mm_ + 43 characters, 256 random bits), for example\nfor MSGMESH_BOOTSTRAP_ADMIN_KEY:\n\n  export MSGMESH_BOOTSTRAP_ADMIN_KEY=$(msgmesh genkey)\n")
	}
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "msgmesh genkey: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	key, _, _, err := auth.NewKey()
	if err != nil {
		fmt.Fprintf(stderr, "msgmesh genkey: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, key)
	return 0
}

// apiFlags are the flags every API command takes.
type apiFlags struct {
	url, key *string
	timeout  *time.Duration
}

func addAPIFlags(fs *pflag.FlagSet) apiFlags {
	u := os.Getenv("MSGMESH_URL")
	if u == "" {
		u = defaultURL
	}
	return apiFlags{
		url:     fs.String("url", u, "base URL of a msgmesh node (MSGMESH_URL)"),
		key:     fs.String("key", "", "the API key to call with; prefer MSGMESH_KEY (a flag shows in ps)"),
		timeout: fs.Duration("timeout", 30*time.Second, "bound on the request"),
	}
}

func (f apiFlags) credential() (string, error) {
	k := *f.key
	if k == "" {
		k = os.Getenv("MSGMESH_KEY")
	}
	if k == "" {
		return "", errors.New("no key: set MSGMESH_KEY (or --key)")
	}
	return k, nil
}

// apiError is a non-2xx answer: {"error","code"} and the status.
type apiError struct {
	Status  int
	Code    string `json:"code"`
	Message string `json:"error"`
}

func (e *apiError) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("HTTP %d", e.Status)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// call sends method path with body (JSON, nil for none) and decodes a 2xx
// answer into out (nil to ignore it).
func (f apiFlags) call(method, path string, body, out any) error {
	key, err := f.credential()
	if err != nil {
		return err
	}
	base, err := url.Parse(strings.TrimRight(*f.url, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("--url %q: want http(s)://host[:port]", *f.url)
	}
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, base.String()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: *f.timeout}).Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return fmt.Errorf("read the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		e := &apiError{Status: resp.StatusCode}
		_ = json.Unmarshal(raw, e)
		return e
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("unexpected answer %q: %w", raw, err)
		}
	}
	return nil
}

// parseFlags parses args; done is true when the command should end now
// with code (help asked for, or a bad flag).
func parseFlags(fs *pflag.FlagSet, args []string, stderr io.Writer) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0, true
		}
		fmt.Fprintf(stderr, "msgmesh %s: %v (see --help)\n", fs.Name(), err)
		return 2, true
	}
	return 0, false
}

// capabilitiesFlag parses --capabilities: a JSON array of
// {"ops","topics","rooms"?} objects, as the API takes them.
func capabilitiesFlag(s string) ([]json.RawMessage, error) {
	if s == "" {
		return nil, nil
	}
	var caps []json.RawMessage
	if err := json.Unmarshal([]byte(s), &caps); err != nil || len(caps) == 0 {
		return nil, fmt.Errorf(`--capabilities: want a JSON array such as '[{"ops":["publish"],"topics":["chat"]}]'`)
	}
	return caps, nil
}

func keys(args []string, stdout, stderr io.Writer) int {
	usage := "usage: msgmesh keys create --name NAME (--role admin|producer|consumer | --capabilities JSON)\n" +
		"       msgmesh keys list\n       msgmesh keys revoke KEY_ID\n\n" +
		"Manages the API keys of the tenant of MSGMESH_KEY on the node at MSGMESH_URL\n(default " + defaultURL + "); the key needs keys.manage. create prints the\nnew key on stdout, once: store it.\n"
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		_, _ = fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	fs := pflag.NewFlagSet("keys "+args[0], pflag.ContinueOnError)
	fs.SetOutput(stderr)
	api := addAPIFlags(fs)
	switch args[0] {
	case "create":
		name := fs.String("name", "", "the key's name (required)")
		role := fs.String("role", "", "admin, producer or consumer")
		capsJSON := fs.String("capabilities", "", `capabilities instead of a role, as JSON: '[{"ops":["publish"],"topics":["chat"],"rooms":["eu"]}]'`)
		fs.Usage = func() { fmt.Fprintf(stdout, "%s\nflags of keys create:\n%s", usage, fs.FlagUsages()) }
		if code, done := parseFlags(fs, args[1:], stderr); done {
			return code
		}
		if *name == "" || (*role == "") == (*capsJSON == "") {
			fmt.Fprintln(stderr, "msgmesh keys create: want --name and exactly one of --role or --capabilities")
			return 2
		}
		body := map[string]any{"name": *name}
		if *role != "" {
			body["role"] = *role
		} else {
			caps, err := capabilitiesFlag(*capsJSON)
			if err != nil {
				fmt.Fprintf(stderr, "msgmesh keys create: %v\n", err)
				return 2
			}
			body["capabilities"] = caps
		}
		var out struct {
			ID   string `json:"id"`
			Key  string `json:"key"`
			Name string `json:"name"`
			Role string `json:"role"`
		}
		if err := api.call("POST", "/v1/keys", body, &out); err != nil {
			fmt.Fprintf(stderr, "msgmesh keys create: %v\n", err)
			return 1
		}
		what := out.Role
		if what == "" {
			what = "capabilities"
		}
		fmt.Fprintf(stderr, "created key %s (%s, %s); it is shown once, store it now:\n", out.ID, out.Name, what)
		fmt.Fprintln(stdout, out.Key)
		return 0
	case "list":
		fs.Usage = func() { fmt.Fprintf(stdout, "%s\nflags of keys list:\n%s", usage, fs.FlagUsages()) }
		if code, done := parseFlags(fs, args[1:], stderr); done {
			return code
		}
		var out json.RawMessage
		if err := api.call("GET", "/v1/keys", nil, &out); err != nil {
			fmt.Fprintf(stderr, "msgmesh keys list: %v\n", err)
			return 1
		}
		var pretty bytes.Buffer
		_ = json.Indent(&pretty, out, "", "  ")
		fmt.Fprintln(stdout, pretty.String())
		return 0
	case "revoke":
		fs.Usage = func() { fmt.Fprintf(stdout, "%s\nflags of keys revoke:\n%s", usage, fs.FlagUsages()) }
		if code, done := parseFlags(fs, args[1:], stderr); done {
			return code
		}
		if fs.NArg() != 1 {
			fmt.Fprintln(stderr, "msgmesh keys revoke: want exactly one KEY_ID")
			return 2
		}
		if err := api.call("DELETE", "/v1/keys/"+url.PathEscape(fs.Arg(0)), nil, nil); err != nil {
			fmt.Fprintf(stderr, "msgmesh keys revoke: %v\n", err)
			return 1
		}
		fmt.Fprintf(stderr, "revoked key %s\n", fs.Arg(0))
		return 0
	}
	fmt.Fprintf(stderr, "msgmesh keys: unknown command %q (want create, list or revoke)\n", args[0])
	return 2
}

// token mints a short-lived token (POST /v1/tokens) with MSGMESH_KEY and
// prints it on stdout.
func token(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("token", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	api := addAPIFlags(fs)
	ttl := fs.Int("ttl", 0, "lifetime in seconds; 0 takes the server's tokens.default_ttl (15 minutes)")
	capsJSON := fs.String("capabilities", "", `narrower capabilities than the key's, as JSON: '[{"ops":["subscribe"],"topics":["orders"]}]'`)
	fs.Usage = func() {
		fmt.Fprintf(stdout, "usage: msgmesh token [--ttl SECONDS] [--capabilities JSON]\n\nMints a short-lived token with MSGMESH_KEY (which needs tokens.mint) on the\nnode at MSGMESH_URL (default %s) and prints it; its expiry goes to stderr.\n\nflags:\n%s", defaultURL, fs.FlagUsages())
	}
	if code, done := parseFlags(fs, args, stderr); done {
		return code
	}
	body := map[string]any{}
	if *ttl != 0 {
		body["ttl_seconds"] = *ttl
	}
	if *capsJSON != "" {
		caps, err := capabilitiesFlag(*capsJSON)
		if err != nil {
			fmt.Fprintf(stderr, "msgmesh token: %v\n", err)
			return 2
		}
		body["capabilities"] = caps
	}
	var out struct {
		Token     string `json:"token"`
		ExpiresAt string `json:"expires_at"`
	}
	if err := api.call("POST", "/v1/tokens", body, &out); err != nil {
		fmt.Fprintf(stderr, "msgmesh token: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "token expires at %s\n", out.ExpiresAt)
	fmt.Fprintln(stdout, out.Token)
	return 0
}
