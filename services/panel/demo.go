package panel

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"

	"github.com/msgmesh/msgmesh/platform/httpapi"
)

// Demo limits beyond the tenant's own plan.
const (
	demoMaxBytes     = 512              // a publish box message
	demoIdleStop     = 30 * time.Second // the sample producer stops this long after the last visit
	demoTick         = time.Second      // the sample producer's rate
	demoBurst        = 5
	demoMaxVisitors  = 10000
	demoTokenTTL     = 600 // seconds
	demoWatchWaitMax = 20 * time.Second
)

func (p *Panel) requireDemo(c *gin.Context) {
	if !p.cfg.Demo.Enabled || p.cfg.Demo.Key == nil {
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeNotFound, "the live demo is turned off on this server (demo.enabled)"))
		return
	}
	c.Next()
}

// demoKey is the demo tenant's key, made on first use; the sample
// producer runs while someone watches.
func (p *Panel) demoKey(ctx context.Context) (string, error) {
	key, err := p.cfg.Demo.Key(ctx)
	if err != nil {
		return "", err
	}
	p.demoMu.Lock()
	p.demoSeen = p.now()
	start := !p.demoRunning
	p.demoRunning = true
	p.demoMu.Unlock()
	if start {
		go p.produce(key)
	}
	return key, nil
}

// produce publishes a sample reading every second until nobody visited
// for demoIdleStop (or Close).
func (p *Panel) produce(key string) {
	t := time.NewTicker(demoTick)
	defer t.Stop()
	sensors := []string{"sensor-a", "sensor-b", "sensor-c"}
	for {
		select {
		case <-p.demoCtx.Done():
			return
		case <-t.C:
		}
		p.demoMu.Lock()
		if p.now().Sub(p.demoSeen) > demoIdleStop {
			p.demoRunning = false
			p.demoMu.Unlock()
			return
		}
		p.demoSeq++
		seq := p.demoSeq
		p.demoMu.Unlock()
		room := sensors[seq%int64(len(sensors))]
		body := map[string]any{"room": room, "data": map[string]any{
			"source": "sample producer", "seq": seq, "celsius": 18 + rand.IntN(80)/10.0,
		}}
		ctx, cancel := context.WithTimeout(p.demoCtx, 10*time.Second)
		err := p.call(ctx, key, "POST", "/v1/topics/"+esc(p.cfg.Demo.Topic)+"/messages", body, nil)
		cancel()
		if err != nil && p.demoCtx.Err() == nil {
			p.log.Warn("demo sample producer", "err", err)
		}
	}
}

func (p *Panel) demoFail(c *gin.Context, err error) {
	if _, ok := err.(*apiError); !ok {
		err = httpapi.Wrap(httpapi.CodeNotReady, err, "the demo is not ready: "+err.Error())
	}
	abortJSON(c, p.log, err)
}

func (p *Panel) demoPage(c *gin.Context) {
	if _, err := p.demoKey(c.Request.Context()); err != nil {
		p.render(c, http.StatusServiceUnavailable, "error", view{Title: "Live demo", Error: "The demo is not ready: " + err.Error()})
		return
	}
	p.render(c, http.StatusOK, "demo", view{Title: "Live demo", Nav: "demo", Data: p.cfg.Demo.Topic})
}

// demoToken mints a 10-minute token that may only subscribe to the demo
// topic (for the page's EventSource).
func (p *Panel) demoToken(c *gin.Context) {
	ctx := c.Request.Context()
	key, err := p.demoKey(ctx)
	if err != nil {
		p.demoFail(c, err)
		return
	}
	var out map[string]any
	body := map[string]any{"ttl_seconds": demoTokenTTL, "capabilities": []map[string]any{{"ops": []string{"subscribe"}, "topics": []string{p.cfg.Demo.Topic}}}}
	if err := p.call(ctx, key, "POST", "/v1/tokens", body, &out); err != nil {
		p.demoFail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"token": out["token"], "expires_at": out["expires_at"], "topic": p.cfg.Demo.Topic})
}

// demoWatch answers what an agent's watch_topic call gets after cursor
// (the MCP server's own watch on the demo topic).
func (p *Panel) demoWatch(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), demoWatchWaitMax+5*time.Second)
	defer cancel()
	key, err := p.demoKey(ctx)
	if err != nil {
		p.demoFail(c, err)
		return
	}
	out, err := p.cfg.Demo.Watch(ctx, key, c.Query("cursor"))
	if err != nil {
		p.demoFail(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

// demoPublish publishes the publish box's text to the demo topic: at most
// demoMaxBytes, demo.messages_per_second per visitor address on this node
// (and the demo tenant's plan limits on top).
func (p *Panel) demoPublish(c *gin.Context) {
	if !sameOrigin(c.Request) {
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeForbidden, "cross-site request refused"))
		return
	}
	var req struct {
		Text string `json:"text"`
		Room string `json:"room"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(c.Writer, c.Request.Body, 4096)).Decode(&req); err != nil {
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodeInvalidRequest, `send {"text": "..."}`))
		return
	}
	if req.Text == "" || len(req.Text) > demoMaxBytes {
		httpapi.Abort(c, nil, httpapi.Errorf(httpapi.CodePayloadTooLarge, "text must be 1 to %d bytes", demoMaxBytes))
		return
	}
	if !p.visitor(c.Request).Allow() {
		httpapi.Abort(c, nil, &httpapi.Error{Code: httpapi.CodeRateLimited, Message: "the demo takes a few messages a second per visitor; wait a moment", RetryAfter: 1})
		return
	}
	ctx := c.Request.Context()
	key, err := p.demoKey(ctx)
	if err != nil {
		p.demoFail(c, err)
		return
	}
	room := req.Room
	if room == "" {
		room = "visitors"
	}
	var out struct {
		Cursor string `json:"cursor"`
	}
	body := map[string]any{"room": room, "data": map[string]any{"source": "publish box", "text": req.Text}}
	if err := p.call(ctx, key, "POST", "/v1/topics/"+esc(p.cfg.Demo.Topic)+"/messages", body, &out); err != nil {
		p.demoFail(c, err)
		return
	}
	c.JSON(http.StatusOK, out)
}

func (p *Panel) visitor(r *http.Request) *rate.Limiter {
	return p.limiterFor(p.demoVisitors, r, rate.Limit(p.cfg.Demo.MessagesPerSecond), demoBurst)
}

// limiterFor is the rate limiter of r's remote address in m (bounded: a
// full map starts over).
func (p *Panel) limiterFor(m map[string]*rate.Limiter, r *http.Request, lim rate.Limit, burst int) *rate.Limiter {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	p.demoMu.Lock()
	defer p.demoMu.Unlock()
	l, ok := m[host]
	if !ok {
		if len(m) >= demoMaxVisitors {
			clear(m)
		}
		l = rate.NewLimiter(lim, burst)
		m[host] = l
	}
	return l
}
