// Package msgmesh is the Go client of MsgMesh's HTTP API: topics,
// publish (one or a batch), long-poll consumer groups with
// acknowledgement, commit, short-lived tokens, webhooks' dead letters and
// SSE subscriptions that resume exactly where they stopped.
//
// A Client is safe for concurrent use. Every method takes a context: its
// cancellation ends the request (and, for Subscribe, the subscription).
// Errors from the server are *Error values; test their kind with
// errors.Is(err, ErrNotFound) and friends. The delivery semantics shared by
// every MsgMesh SDK are in sdks/SEMANTICS.md.
package msgmesh

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultURL is where a Client talks when Options.URL is empty.
const DefaultURL = "http://127.0.0.1:8080"

// Options configure a Client. Zero values take the documented defaults.
type Options struct {
	// URL is the base URL of every API (default DefaultURL). The
	// per-API URLs below override it for deployments that split them.
	URL string
	// ControlPlaneURL serves /v1/topics (management), /v1/tokens and
	// /v1/webhooks; GatewayURL publish, poll and commit; RealtimeURL the
	// SSE streams. Each defaults to URL.
	ControlPlaneURL, GatewayURL, RealtimeURL string
	// APIKey is sent as "Authorization: Bearer <key>". A token minted by
	// MintToken works here too (it is the same header).
	APIKey string
	// GetToken, when APIKey is empty, returns a token and its expiry (zero:
	// unknown). It is called again when the expiry is near (10 s) and when
	// the server answers 401 token_expired.
	GetToken func(ctx context.Context) (token string, expiresAt time.Time, err error)
	// HTTPClient sends the requests (default: a client without a
	// timeout; each call is bounded by its context, polls and streams
	// are long).
	HTTPClient *http.Client
	// Reconnect bounds the full-jitter backoff of subscriptions: the n-th
	// retry waits a random time in [0, min(Max, Min·2ⁿ)]. Defaults 500 ms
	// and 20 s.
	Reconnect Backoff
	// UserAgent is sent with every request (default "msgmesh-go").
	UserAgent string
}

// Backoff is a full-jitter exponential backoff.
type Backoff struct {
	Min, Max time.Duration
}

// Client talks to MsgMesh.
type Client struct {
	cp, gw, rt string
	opts       Options
	hc         *http.Client

	tokMu     sync.Mutex
	token     string
	tokExpiry time.Time

	// batches remembers the last poll batch of each (topic, group,
	// consumer), sent as "ack" by the next poll.
	batchMu sync.Mutex
	batches map[batchKey]string
}

type batchKey struct{ topic, group, consumer string }

// New returns a Client. It fails when a URL does not parse or when
// neither APIKey nor GetToken is set.
func New(o Options) (*Client, error) {
	if o.APIKey == "" && o.GetToken == nil {
		return nil, errors.New("msgmesh: Options.APIKey or Options.GetToken is required")
	}
	if o.URL == "" {
		o.URL = DefaultURL
	}
	base := func(u string) (string, error) {
		if u == "" {
			u = o.URL
		}
		p, err := url.Parse(u)
		if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
			return "", fmt.Errorf("msgmesh: URL %q: want http(s)://host[:port]", u)
		}
		return strings.TrimRight(u, "/"), nil
	}
	c := &Client{opts: o, hc: o.HTTPClient, batches: map[batchKey]string{}}
	var err error
	if c.cp, err = base(o.ControlPlaneURL); err != nil {
		return nil, err
	}
	if c.gw, err = base(o.GatewayURL); err != nil {
		return nil, err
	}
	if c.rt, err = base(o.RealtimeURL); err != nil {
		return nil, err
	}
	if c.hc == nil {
		c.hc = &http.Client{}
	}
	if c.opts.Reconnect.Min <= 0 {
		c.opts.Reconnect.Min = 500 * time.Millisecond
	}
	if c.opts.Reconnect.Max <= 0 {
		c.opts.Reconnect.Max = 20 * time.Second
	}
	if c.opts.Reconnect.Max < c.opts.Reconnect.Min {
		c.opts.Reconnect.Max = c.opts.Reconnect.Min
	}
	if c.opts.UserAgent == "" {
		c.opts.UserAgent = "msgmesh-go"
	}
	return c, nil
}

// credential is the bearer of the next request: the key, or a token
// from GetToken (cached until 10 s before its expiry; refresh forces a
// new one).
func (c *Client) credential(ctx context.Context, refresh bool) (string, error) {
	if c.opts.APIKey != "" {
		return c.opts.APIKey, nil
	}
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	if !refresh && c.token != "" && (c.tokExpiry.IsZero() || time.Until(c.tokExpiry) > 10*time.Second) {
		return c.token, nil
	}
	tok, exp, err := c.opts.GetToken(ctx)
	if err != nil {
		return "", fmt.Errorf("msgmesh: GetToken: %w", err)
	}
	if tok == "" {
		return "", errors.New("msgmesh: GetToken returned an empty token")
	}
	c.token, c.tokExpiry = tok, exp
	return tok, nil
}

// canRefresh: a 401 token_expired is worth one retry with a new token.
func (c *Client) canRefresh(err error) bool {
	var e *Error
	return c.opts.APIKey == "" && errors.As(err, &e) && e.Status == http.StatusUnauthorized
}

// newRequest builds an authenticated request.
func (c *Client) newRequest(ctx context.Context, method, u string, body []byte, refresh bool) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	cred, err := c.credential(ctx, refresh)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("User-Agent", c.opts.UserAgent)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// maxAnswerBytes bounds a JSON answer read into memory.
const maxAnswerBytes = 64 << 20

// do sends a JSON request to base+path and decodes a 2xx answer into out
// (nil: discarded). A non-2xx answer is an *Error.
func (c *Client) do(ctx context.Context, method, base, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("msgmesh: encode request: %w", err)
		}
	}
	err := c.try(ctx, method, base+path, body, out, false)
	if err != nil && c.canRefresh(err) {
		err = c.try(ctx, method, base+path, body, out, true)
	}
	return err
}

func (c *Client) try(ctx context.Context, method, u string, body []byte, out any, refresh bool) error {
	req, err := c.newRequest(ctx, method, u, body, refresh)
	if err != nil {
		return err
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("msgmesh: %s %s: read answer: %w", method, req.URL.Path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return errorOf(resp, b)
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("msgmesh: %s %s: decode answer: %w", method, req.URL.Path, err)
	}
	return nil
}

// errorOf reads a non-2xx answer: {"error","code","request_id"?}, the
// X-Request-Id and Retry-After headers.
func errorOf(resp *http.Response, body []byte) *Error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id")}
	var b struct {
		Error     string `json:"error"`
		Code      string `json:"code"`
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(body, &b) == nil {
		e.Message, e.Code = b.Error, b.Code
		if b.RequestID != "" {
			e.RequestID = b.RequestID
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(ra); err == nil && s >= 0 {
			e.RetryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.RetryAfter = max(time.Until(t), 0)
		}
	}
	return e
}

func esc(s string) string { return url.PathEscape(s) }
