package app

import (
	"bufio"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/services/mcp"
)

// mountMCP serves the MCP server over streamable HTTP at /mcp, behind the
// API's authentication and rate limit. Each tool call acts with the
// caller's own Bearer key or token through this node's own API (so
// capabilities apply exactly as over HTTP, and watch_topic waits on the
// node's realtime fan-out).
func (a *App) mountMCP() error {
	self, err := a.selfURL()
	if err != nil {
		return err
	}
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return err
	}
	a.toolKey = hex.EncodeToString(secret)
	s, err := mcp.New(mcp.Config{
		URL:        self,
		HTTPClient: loopbackClient(a.toolKey),
		Logger:     a.log.With("component", "mcp"),
		Registerer: a.reg,
	})
	if err != nil {
		return err
	}
	a.mcp = s
	h := s.Handler()
	a.api.POST("/mcp", func(c *gin.Context) {
		// One request, one JSON-RPC message: a batch (allowed by protocol
		// versions before 2025-06-18) would make many tool calls, and so
		// many API calls, for the one request the rate limit counted.
		if batch, err := jsonRPCBatch(c.Request); err != nil || batch {
			httpapi.Abort(c, a.log, httpapi.Errorf(httpapi.CodeInvalidRequest,
				"send one JSON-RPC message per POST to /mcp: batches are not accepted"))
			return
		}
		// The tools act with the credential the API's middleware read
		// (whatever the scheme's case), handed on in canonical form.
		c.Request.Header.Set("Authorization", "Bearer "+auth.CredentialOf(c))
		h.ServeHTTP(c.Writer, c.Request)
	})
	// Stateless: no standalone stream, no session to end.
	noMethod := func(c *gin.Context) {
		c.Header("Allow", "POST")
		httpapi.NoMethod(c)
	}
	a.api.GET("/mcp", noMethod)
	a.api.DELETE("/mcp", noMethod)
	return nil
}

// jsonRPCBatch reports whether r's body is a JSON array (a JSON-RPC batch):
// leading white space (insignificant in JSON) is dropped, up to
// maxLeadingSpace, and the first other byte decides; the handler reads the
// body from that byte on.
func jsonRPCBatch(r *http.Request) (bool, error) {
	br := bufio.NewReader(r.Body)
	r.Body = struct {
		io.Reader
		io.Closer
	}{br, r.Body}
	for n := 0; ; n++ {
		b, err := br.ReadByte()
		if err == io.EOF {
			return false, nil // nothing but white space: the handler refuses it
		}
		if err != nil {
			return false, err
		}
		switch b {
		case ' ', '\t', '\r', '\n':
			if n >= maxLeadingSpace {
				return false, errors.New("too much leading white space")
			}
			continue
		}
		_ = br.UnreadByte()
		return b == '[', nil
	}
}

// maxLeadingSpace bounds the white space read before a /mcp body's first
// JSON byte.
const maxLeadingSpace = 64 << 10

// selfURL is this node's own API over loopback (for the MCP tools and
// the panel).
func (a *App) selfURL() (string, error) {
	host, port, err := net.SplitHostPort(a.Addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// hToolCall marks an API call a tool of this node's /mcp makes on the
// caller's behalf; its value is the process's random toolKey, so no one
// outside the process can send it.
const hToolCall = "X-Msgmesh-Tool-Call"

// loopbackClient sends the MCP tools' API calls to this node, marked with
// key (hToolCall) unless it is empty (the panel's calls, each one a user's
// request, are counted): enough idle connections for concurrent agents
// (the default keeps 2 per host).
func loopbackClient(key string) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 256
	if key == "" {
		return &http.Client{Transport: t}
	}
	return &http.Client{Transport: toolCalls{key: key, rt: t}}
}

type toolCalls struct {
	key string
	rt  http.RoundTripper
}

func (tc toolCalls) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(hToolCall, tc.key)
	return tc.rt.RoundTrip(r)
}

// toolCall reports whether c is an API call made by a tool of this node's
// /mcp (the /mcp request that caused it has been counted already).
func (a *App) toolCall(c *gin.Context) bool {
	v := c.GetHeader(hToolCall)
	return a.toolKey != "" && v != "" && subtle.ConstantTimeCompare([]byte(v), []byte(a.toolKey)) == 1
}

// MCP is the node's MCP server (its Waiters gauge is what tests read).
func (a *App) MCP() *mcp.Server { return a.mcp }
