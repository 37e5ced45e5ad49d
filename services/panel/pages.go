package panel

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/time/rate"
)

var funcs = template.FuncMap{
	"json": func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	},
	"raw": func(m json.RawMessage) string {
		var out bytes.Buffer
		if err := json.Indent(&out, m, "", "  "); err != nil {
			return string(m)
		}
		return out.String()
	},
	"duration": func(ms int64) string { return (time.Duration(ms) * time.Millisecond).String() },
	"join":     strings.Join,
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
}

// view is what every page template gets.
type view struct {
	Title  string
	Nav    string
	S      session
	Flash  string
	Error  string
	Status int
	Data   any
}

func (p *Panel) render(c *gin.Context, status int, page string, v view) {
	t, ok := p.pages[page]
	if !ok {
		c.String(http.StatusInternalServerError, "no page %s", page)
		return
	}
	if s, ok := c.Get("session"); ok {
		v.S = s.(session)
	}
	v.Status = status
	var b bytes.Buffer
	if err := t.Execute(&b, v); err != nil {
		p.log.Error("panel template", "page", page, "err", err)
		c.String(http.StatusInternalServerError, "page %s failed to render", page)
		return
	}
	c.Data(status, "text/html; charset=utf-8", b.Bytes())
}

func sess(c *gin.Context) session { return c.MustGet("session").(session) }

// requireSession sends a browser without a valid session to the login
// page and refuses a state-changing request without the session's CSRF
// token or from another site.
func (p *Panel) requireSession(c *gin.Context) {
	s, ok := p.current(c)
	if !ok {
		if c.Request.Method == http.MethodGet {
			c.Redirect(http.StatusSeeOther, "/panel/login")
		} else {
			p.render(c, http.StatusUnauthorized, "error", view{Title: "Signed out", Error: "Your session ended: sign in again."})
		}
		c.Abort()
		return
	}
	c.Set("session", s)
	if c.Request.Method != http.MethodGet && !checkCSRF(c, s) {
		p.render(c, http.StatusForbidden, "error", view{Title: "Refused", Error: "Cross-site request refused: this form did not come from the panel (missing or wrong CSRF token, or another origin)."})
		c.Abort()
		return
	}
	c.Next()
}

// fail shows an API error; a key that stopped working (revoked, tenant
// deleted) ends the session.
func (p *Panel) fail(c *gin.Context, title string, err error) {
	if unauthorized(err) {
		p.setCookie(c, "", -1)
		p.render(c, http.StatusUnauthorized, "login", view{Title: "Sign in", Error: "The session's key no longer works (" + err.Error() + "). Sign in with a valid key."})
		return
	}
	st := statusOf(err)
	if st < 400 {
		st = http.StatusInternalServerError
	}
	p.render(c, st, "error", view{Title: title, Error: err.Error()})
}

func (p *Panel) loginPage(c *gin.Context) {
	if _, ok := p.current(c); ok {
		c.Redirect(http.StatusSeeOther, "/panel/")
		return
	}
	p.render(c, http.StatusOK, "login", view{Title: "Sign in"})
}

// Sign-in attempts per address per node.
const (
	loginRate  = rate.Limit(1) // per second
	loginBurst = 10
)

func (p *Panel) login(c *gin.Context) {
	if !sameOrigin(c.Request) {
		p.render(c, http.StatusForbidden, "error", view{Title: "Refused", Error: "Cross-site sign-in refused."})
		return
	}
	if !p.limiterFor(p.logins, c.Request, loginRate, loginBurst).Allow() {
		c.Header("Retry-After", "1")
		p.render(c, http.StatusTooManyRequests, "login", view{Title: "Sign in", Error: "Too many sign-in attempts from this address; wait a moment."})
		return
	}
	key := strings.TrimSpace(c.PostForm("key"))
	if key == "" {
		p.render(c, http.StatusBadRequest, "login", view{Title: "Sign in", Error: "Paste a key."})
		return
	}
	ctx := c.Request.Context()
	var t tenantView
	err := p.call(ctx, key, "GET", "/v1/tenant", nil, &t)
	if st, ok := p.suspended(err, key); ok {
		// The key is valid but its tenant suspended: sign in to see why.
		t, err = st, nil
	}
	if err != nil {
		msg := "That key was not accepted: " + err.Error()
		st := statusOf(err)
		if st == http.StatusForbidden && strings.Contains(err.Error(), "operator") {
			msg = "The operator key belongs to no tenant; sign in with a tenant's key (POST /v1/tenants answers its admin key)."
		}
		if st < 400 || st >= 500 {
			st = http.StatusBadGateway
		}
		p.render(c, st, "login", view{Title: "Sign in", Error: msg})
		return
	}
	s := session{ID: randomToken(), Key: key, Tenant: t.ID, CSRF: randomToken(), Expires: p.now().Add(p.cfg.SessionTTL).Unix()}
	// What the pages offer follows what the key may do (the API decides
	// anyway): a consumer key sees no key or webhook management.
	s.Keys = p.call(ctx, key, "GET", "/v1/keys", nil, nil) == nil
	s.Webhooks = p.call(ctx, key, "GET", "/v1/webhooks", nil, nil) == nil
	v, err := p.seal(ctx, s)
	if err != nil {
		p.render(c, http.StatusInternalServerError, "login", view{Title: "Sign in", Error: "Could not seal the session: " + err.Error()})
		return
	}
	p.setCookie(c, v, int(p.cfg.SessionTTL.Seconds()))
	c.Redirect(http.StatusSeeOther, "/panel/")
}

func (p *Panel) logout(c *gin.Context) {
	s := sess(c)
	until := time.Unix(s.Expires, 0)
	p.loggedOut.add(s.ID, until, p.now())
	if p.cfg.Sessions != nil {
		if err := p.cfg.Sessions.End(c.Request.Context(), s.Tenant, s.Key, s.ID, until); err != nil {
			// Ended here already; the other nodes would still open a kept
			// copy of the cookie until it expires.
			p.log.Warn("panel: logout not recorded for the other nodes", "tenant", s.Tenant, "err", err)
		}
	}
	p.setCookie(c, "", -1)
	c.Redirect(http.StatusSeeOther, "/panel/login")
}

// suspended: err is the API's 403 tenant_suspended for key, and the
// tenant's suspension (with the operator's reason) is known.
func (p *Panel) suspended(err error, key string) (tenantView, bool) {
	e, ok := err.(*apiError)
	if !ok || e.Code != "tenant_suspended" || p.cfg.Suspension == nil {
		return tenantView{}, false
	}
	tenant, reason, sus := p.cfg.Suspension(key)
	if !sus {
		return tenantView{}, false
	}
	return tenantView{ID: tenant, Suspended: true, SuspendedReason: reason}, true
}

type overviewData struct {
	Tenant       tenantView
	Month        string
	Used         int64
	Quota        int64
	Percent      int64
	RPS, MPS     float64
	Topics       int
	SessionUntil string
}

func (p *Panel) overview(c *gin.Context) {
	s := sess(c)
	ctx := c.Request.Context()
	var d overviewData
	err := p.call(ctx, s.Key, "GET", "/v1/tenant", nil, &d.Tenant)
	if st, ok := p.suspended(err, s.Key); ok {
		d.Tenant, err = st, nil
	}
	if err != nil {
		p.fail(c, "Overview", err)
		return
	}
	if p.cfg.Usage != nil {
		d.Month, d.Used = p.cfg.Usage(d.Tenant.ID)
	}
	pl := p.cfg.Limits.Plan(d.Tenant.Plan)
	d.Quota, d.RPS, d.MPS = pl.MonthlyMessages, pl.RequestsPerSecond, pl.MessagesPerSecond
	if d.Quota > 0 {
		d.Percent = min(100, d.Used*100/d.Quota)
	}
	var ts struct{ Topics []topicView }
	if err := p.call(ctx, s.Key, "GET", "/v1/topics", nil, &ts); err == nil {
		d.Topics = len(ts.Topics)
	}
	d.SessionUntil = time.Unix(s.Expires, 0).UTC().Format(time.RFC3339)
	p.render(c, http.StatusOK, "overview", view{Title: "Overview", Nav: "overview", Data: d})
}

func (p *Panel) topics(c *gin.Context) {
	s := sess(c)
	var ts struct{ Topics []topicView }
	if err := p.call(c.Request.Context(), s.Key, "GET", "/v1/topics", nil, &ts); err != nil {
		p.fail(c, "Topics", err)
		return
	}
	p.render(c, http.StatusOK, "topics", view{Title: "Topics", Nav: "topics", Flash: c.Query("flash"), Data: ts.Topics})
}

func (p *Panel) createTopic(c *gin.Context) {
	s := sess(c)
	body := map[string]any{"name": strings.TrimSpace(c.PostForm("name"))}
	if n := strings.TrimSpace(c.PostForm("partitions")); n != "" {
		v, err := strconv.Atoi(n)
		if err != nil {
			p.render(c, http.StatusBadRequest, "error", view{Title: "Topics", Error: "partitions must be a number"})
			return
		}
		body["partitions"] = v
	}
	var t topicView
	if err := p.call(c.Request.Context(), s.Key, "POST", "/v1/topics", body, &t); err != nil {
		p.fail(c, "Create topic", err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/panel/topics/"+esc(t.Name))
}

func (p *Panel) deleteTopic(c *gin.Context) {
	s := sess(c)
	name := c.Param("topic")
	if c.PostForm("confirm") != name {
		p.render(c, http.StatusBadRequest, "error", view{Title: "Delete topic", Error: fmt.Sprintf("Type the topic's name (%s) to confirm deleting it.", name)})
		return
	}
	if err := p.call(c.Request.Context(), s.Key, "DELETE", "/v1/topics/"+esc(name), nil, nil); err != nil {
		p.fail(c, "Delete topic", err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/panel/topics"+query("flash", "Topic "+name+" deleted."))
}

// groupLag is one consumer group's progress on the topic.
type groupLag struct {
	Name       string // MsgMesh name: the poll group, or "webhook <id>"
	KafkaGroup string
	State      string
	Members    int
	Total      int64
	Partitions []partitionLag
	Err        string
}

type partitionLag struct {
	Partition int32
	Committed int64 // -1: nothing committed
	End       int64
	Lag       int64
}

type topicData struct {
	Topic      topicView
	EndOffsets []partitionLag
	Groups     []groupLag
	GroupsErr  string
	Published  string
	Room       string
	Cursor     string
}

func (p *Panel) topic(c *gin.Context) {
	s := sess(c)
	ctx := c.Request.Context()
	name := c.Param("topic")
	d := topicData{Published: c.Query("published"), Room: c.Query("room"), Cursor: c.Query("cursor")}
	if err := p.call(ctx, s.Key, "GET", "/v1/topics/"+esc(name), nil, &d.Topic); err != nil {
		p.fail(c, "Topic "+name, err)
		return
	}
	// The key may read the topic: show its Kafka offsets and groups.
	p.offsetsAndGroups(ctx, s, &d)
	p.render(c, http.StatusOK, "topic", view{Title: "Topic " + name, Nav: "topics", Data: d})
}

// offsetsAndGroups reads the topic's end offsets and the lag of its poll
// groups and of its webhooks' groups (kadm; the groups of this tenant and
// topic only).
func (p *Panel) offsetsAndGroups(ctx context.Context, s session, d *topicData) {
	if p.cfg.Admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	kt := d.Topic.KafkaTopic
	ends, err := p.cfg.Admin.ListEndOffsets(ctx, kt)
	if err != nil {
		d.GroupsErr = "end offsets: " + err.Error()
		return
	}
	ends.Each(func(o kadm.ListedOffset) {
		d.EndOffsets = append(d.EndOffsets, partitionLag{Partition: o.Partition, End: o.Offset})
	})
	sort.Slice(d.EndOffsets, func(i, j int) bool { return d.EndOffsets[i].Partition < d.EndOffsets[j].Partition })
	prefix := p.cfg.Names.Group(s.Tenant, d.Topic.Name, "")
	named := map[string]string{}
	listed, err := p.cfg.Admin.ListGroups(ctx)
	if err != nil {
		d.GroupsErr = "groups: " + err.Error()
		return
	}
	for _, g := range listed.Groups() {
		if rest, ok := strings.CutPrefix(g, prefix); ok && rest != "" && !strings.Contains(rest, ".") {
			named[g] = rest
		}
	}
	if s.Webhooks {
		var ws struct{ Webhooks []webhookView }
		if err := p.call(ctx, s.Key, "GET", "/v1/webhooks", nil, &ws); err == nil {
			for _, w := range ws.Webhooks {
				if w.Topic == d.Topic.Name && w.Group != "" {
					named[w.Group] = "webhook " + w.ID
				}
			}
		}
	}
	if len(named) == 0 {
		return
	}
	gs := make([]string, 0, len(named))
	for g := range named {
		gs = append(gs, g)
	}
	lags, err := p.cfg.Admin.Lag(ctx, gs...)
	if err != nil {
		d.GroupsErr = "lag: " + err.Error()
		return
	}
	for _, g := range gs {
		l, ok := lags[g]
		gl := groupLag{Name: named[g], KafkaGroup: g}
		if !ok {
			continue
		}
		if err := l.Error(); err != nil {
			gl.Err = err.Error()
		}
		gl.State, gl.Members = l.State, len(l.Members)
		for part, ml := range l.Lag[kt] {
			pl := partitionLag{Partition: part, Committed: ml.Commit.At, End: ml.End.Offset, Lag: ml.Lag}
			if ml.Err != nil {
				gl.Err = ml.Err.Error()
			}
			gl.Total += max(pl.Lag, 0)
			gl.Partitions = append(gl.Partitions, pl)
		}
		sort.Slice(gl.Partitions, func(i, j int) bool { return gl.Partitions[i].Partition < gl.Partitions[j].Partition })
		d.Groups = append(d.Groups, gl)
	}
	sort.Slice(d.Groups, func(i, j int) bool { return d.Groups[i].Name < d.Groups[j].Name })
}

func (p *Panel) publish(c *gin.Context) {
	s := sess(c)
	name := c.Param("topic")
	raw := c.PostForm("data")
	// Valid JSON is published as JSON; anything else as a JSON string.
	var data any = raw
	if json.Valid([]byte(raw)) {
		data = json.RawMessage(raw)
	}
	body := map[string]any{"data": data}
	if room := c.PostForm("room"); room != "" {
		body["room"] = room
	}
	var out struct{ Cursor string }
	if err := p.call(c.Request.Context(), s.Key, "POST", "/v1/topics/"+esc(name)+"/messages", body, &out); err != nil {
		p.fail(c, "Publish to "+name, err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/panel/topics/"+esc(name)+query("published", out.Cursor))
}

// tailToken mints the live tail's short-lived token: subscribe on this
// topic only, 5 minutes, from the session's key (the page asks for a new
// one when the stream says token_expired).
func (p *Panel) tailToken(c *gin.Context) {
	s := sess(c)
	name := c.Param("topic")
	var out map[string]any
	body := map[string]any{"ttl_seconds": 300, "capabilities": []map[string]any{{"ops": []string{"subscribe"}, "topics": []string{name}}}}
	if err := p.call(c.Request.Context(), s.Key, "POST", "/v1/tokens", body, &out); err != nil {
		abortJSON(c, p.log, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"token": out["token"], "expires_at": out["expires_at"]})
}

type keysData struct {
	Keys    []keyView
	Created *keyView
}

func (p *Panel) keys(c *gin.Context) {
	s := sess(c)
	var d keysData
	var ks struct{ Keys []keyView }
	if err := p.call(c.Request.Context(), s.Key, "GET", "/v1/keys", nil, &ks); err != nil {
		p.fail(c, "Keys", err)
		return
	}
	d.Keys = ks.Keys
	p.render(c, http.StatusOK, "keys", view{Title: "Keys", Nav: "keys", Flash: c.Query("flash"), Data: d})
}

// createKey answers the new key's page directly (no redirect): the
// plaintext is in this one answer (no-store) and nowhere else.
func (p *Panel) createKey(c *gin.Context) {
	s := sess(c)
	ctx := c.Request.Context()
	var k keyView
	body := map[string]any{"name": strings.TrimSpace(c.PostForm("name")), "role": c.PostForm("role")}
	if err := p.call(ctx, s.Key, "POST", "/v1/keys", body, &k); err != nil {
		p.fail(c, "Create key", err)
		return
	}
	var ks struct{ Keys []keyView }
	if err := p.call(ctx, s.Key, "GET", "/v1/keys", nil, &ks); err != nil {
		p.fail(c, "Keys", err)
		return
	}
	p.render(c, http.StatusCreated, "keys", view{Title: "Keys", Nav: "keys", Data: keysData{Keys: ks.Keys, Created: &k}})
}

func (p *Panel) revokeKey(c *gin.Context) {
	s := sess(c)
	id := c.Param("id")
	if err := p.call(c.Request.Context(), s.Key, "DELETE", "/v1/keys/"+esc(id), nil, nil); err != nil {
		p.fail(c, "Revoke key", err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/panel/keys"+query("flash", "Key "+id+" revoked (on every node within a second)."))
}

type webhooksData struct {
	Webhooks []webhookView
	Topics   []topicView
	Created  *webhookView
}

func (p *Panel) webhooks(c *gin.Context) {
	p.webhooksPage(c, http.StatusOK, nil)
}

func (p *Panel) webhooksPage(c *gin.Context, status int, created *webhookView) {
	s := sess(c)
	ctx := c.Request.Context()
	var ws struct{ Webhooks []webhookView }
	if err := p.call(ctx, s.Key, "GET", "/v1/webhooks", nil, &ws); err != nil {
		p.fail(c, "Webhooks", err)
		return
	}
	var ts struct{ Topics []topicView }
	_ = p.call(ctx, s.Key, "GET", "/v1/topics", nil, &ts)
	p.render(c, status, "webhooks", view{Title: "Webhooks", Nav: "webhooks", Flash: c.Query("flash"),
		Data: webhooksData{Webhooks: ws.Webhooks, Topics: ts.Topics, Created: created}})
}

func (p *Panel) createWebhook(c *gin.Context) {
	s := sess(c)
	body := map[string]any{"topic": c.PostForm("topic"), "url": strings.TrimSpace(c.PostForm("url"))}
	if room := c.PostForm("room"); room != "" {
		body["room"] = room
	}
	var w webhookView
	if err := p.call(c.Request.Context(), s.Key, "POST", "/v1/webhooks", body, &w); err != nil {
		p.fail(c, "Create webhook", err)
		return
	}
	p.webhooksPage(c, http.StatusCreated, &w)
}

type webhookData struct {
	Webhook     webhookView
	Attempts    []attemptView
	AttemptsErr string
	Source      string
	Next        string
	Outcome     string
}

func (p *Panel) webhook(c *gin.Context) {
	s := sess(c)
	ctx := c.Request.Context()
	id := c.Param("id")
	d := webhookData{Outcome: c.Query("outcome")}
	if err := p.call(ctx, s.Key, "GET", "/v1/webhooks/"+esc(id), nil, &d.Webhook); err != nil {
		p.fail(c, "Webhook "+id, err)
		return
	}
	var at struct {
		Attempts []attemptView
		Next     *string
		Source   string
	}
	err := p.call(ctx, s.Key, "GET", "/v1/webhooks/"+esc(id)+"/attempts"+query("limit", "50", "outcome", d.Outcome, "after", c.Query("after")), nil, &at)
	switch {
	case routeMissing(err):
		d.AttemptsErr = "Delivery-attempt history is unavailable on this server (GET /v1/webhooks/{id}/attempts is not served)."
	case err != nil:
		d.AttemptsErr = "Delivery-attempt history could not be read: " + err.Error()
	default:
		d.Attempts, d.Source = at.Attempts, at.Source
		if at.Next != nil {
			d.Next = *at.Next
		}
	}
	p.render(c, http.StatusOK, "webhook", view{Title: "Webhook " + id, Nav: "webhooks", Flash: c.Query("flash"), Data: d})
}

func (p *Panel) enableWebhook(c *gin.Context) {
	s := sess(c)
	id := c.Param("id")
	body := map[string]any{"enabled": true}
	if u := strings.TrimSpace(c.PostForm("url")); u != "" {
		body["url"] = u
	}
	if err := p.call(c.Request.Context(), s.Key, "PATCH", "/v1/webhooks/"+esc(id), body, nil); err != nil {
		p.fail(c, "Re-enable webhook", err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/panel/webhooks/"+esc(id)+query("flash", "Webhook re-enabled: delivery resumes from where it stopped."))
}

func (p *Panel) deleteWebhook(c *gin.Context) {
	s := sess(c)
	id := c.Param("id")
	if err := p.call(c.Request.Context(), s.Key, "DELETE", "/v1/webhooks/"+esc(id), nil, nil); err != nil {
		p.fail(c, "Delete webhook", err)
		return
	}
	c.Redirect(http.StatusSeeOther, "/panel/webhooks"+query("flash", "Webhook "+id+" deleted."))
}

type dlqData struct {
	Webhook   webhookView
	Inspected bool
	Letters   []deadLetterView
	Note      string
	// Replay preview and result.
	Preview  bool
	All      bool
	Cursors  []string
	Replayed *replayResult
}

type replayResult struct {
	Replayed int      `json:"replayed"`
	Cursors  []string `json:"cursors"`
	NotFound []string `json:"not_found"`
	More     bool     `json:"more"`
}

func (p *Panel) dlqWebhook(c *gin.Context) (webhookView, bool) {
	s := sess(c)
	id := c.Param("id")
	var w webhookView
	if err := p.call(c.Request.Context(), s.Key, "GET", "/v1/webhooks/"+esc(id), nil, &w); err != nil {
		p.fail(c, "Dead letters of "+id, err)
		return w, false
	}
	return w, true
}

// dlq shows the warning and the inspect button: opening the page never
// inspects (inspection is one-shot).
func (p *Panel) dlq(c *gin.Context) {
	w, ok := p.dlqWebhook(c)
	if !ok {
		return
	}
	p.render(c, http.StatusOK, "dlq", view{Title: "Dead letters", Nav: "webhooks", Data: dlqData{Webhook: w}})
}

func (p *Panel) inspect(c *gin.Context) {
	w, ok := p.dlqWebhook(c)
	if !ok {
		return
	}
	var out struct {
		DeadLetters []deadLetterView `json:"dead_letters"`
		Note        string           `json:"note"`
	}
	if err := p.call(c.Request.Context(), sess(c).Key, "GET", "/v1/webhooks/"+esc(w.ID)+"/dead-letters", nil, &out); err != nil {
		p.fail(c, "Inspect dead letters", err)
		return
	}
	p.render(c, http.StatusOK, "dlq", view{Title: "Dead letters", Nav: "webhooks",
		Data: dlqData{Webhook: w, Inspected: true, Letters: out.DeadLetters, Note: out.Note}})
}

// replay first previews (how many go back, to whom), then on confirm
// replays.
func (p *Panel) replay(c *gin.Context) {
	w, ok := p.dlqWebhook(c)
	if !ok {
		return
	}
	d := dlqData{Webhook: w, All: c.PostForm("all") == "1", Cursors: c.PostFormArray("cursor")}
	if !d.All && len(d.Cursors) == 0 {
		p.render(c, http.StatusBadRequest, "error", view{Title: "Replay", Error: "Select dead letters to replay, or replay all."})
		return
	}
	if c.PostForm("confirm") != "1" {
		d.Preview = true
		p.render(c, http.StatusOK, "dlq", view{Title: "Replay dead letters", Nav: "webhooks", Data: d})
		return
	}
	var body any
	if !d.All {
		body = map[string]any{"cursors": d.Cursors}
	}
	var res replayResult
	if err := p.call(c.Request.Context(), sess(c).Key, "POST", "/v1/webhooks/"+esc(w.ID)+"/dead-letters/replay", body, &res); err != nil {
		p.fail(c, "Replay dead letters", err)
		return
	}
	d.Replayed = &res
	p.render(c, http.StatusOK, "dlq", view{Title: "Dead letters replayed", Nav: "webhooks", Data: d})
}

type auditData struct {
	Events      []auditEvent
	Next        string
	Source      string
	Type        string
	Unavailable string
}

func (p *Panel) audit(c *gin.Context) {
	s := sess(c)
	d := auditData{Type: c.Query("type")}
	var out struct {
		Events []auditEvent
		Next   *string
		Source string
	}
	err := p.call(c.Request.Context(), s.Key, "GET", "/v1/audit"+query("limit", "100", "type", d.Type, "after", c.Query("after")), nil, &out)
	switch {
	case routeMissing(err):
		d.Unavailable = "The audit log is unavailable on this server (GET /v1/audit is not served)."
	case err != nil:
		p.fail(c, "Audit log", err)
		return
	default:
		d.Events, d.Source = out.Events, out.Source
		if out.Next != nil {
			d.Next = *out.Next
		}
	}
	p.render(c, http.StatusOK, "audit", view{Title: "Audit log", Nav: "audit", Data: d})
}
