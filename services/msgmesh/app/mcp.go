package app

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
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
