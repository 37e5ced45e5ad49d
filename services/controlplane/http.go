package controlplane

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
)

// Routes registers the control-plane API on r (already authenticated).
//
//	POST   /v1/tenants            operator: {"id","plan"} → 201 {"id","plan","strict_topics","admin_key"}
//	GET    /v1/tenants[/{id}]     operator: list, one
//	PATCH  /v1/tenants/{id}       operator: {"plan"} (updates the topics' retention.ms)
//	POST   /v1/tenants/{id}/suspend   operator: {"reason"?} → 403 tenant_suspended for its credentials
//	POST   /v1/tenants/{id}/reinstate operator (a top-up lifts the suspension)
//	GET|POST /v1/signing-keys     operator: list kids; rotate (new key signs)
//	POST   /v1/signing-keys/{kid}/retire  operator: its tokens stop verifying
//	POST   /v1/tokens             tokens.mint (a key): {"ttl_seconds"?,"capabilities"?} → 200 {"token","expires_at","ttl_seconds"}
//	GET    /v1/tenant             any key: the caller's tenant
//	PATCH  /v1/tenant             admin: {"strict_topics": bool}
//	POST   /v1/keys               admin: {"name","role"} → 201 {"id","key",...} (plaintext once)
//	GET    /v1/keys               admin: {"keys": [...]} (never plaintext)
//	DELETE /v1/keys/{id}          admin: 204
//	POST   /v1/topics             admin: {"name","partitions"?} → 201 topic
//	GET    /v1/topics             any role: {"topics": [...]}
//	GET    /v1/topics/{topic}     any role: topic
//	DELETE /v1/topics/{topic}     admin: 204
func (s *Service) Routes(r gin.IRouter) {
	r.POST("/v1/tenants", s.createTenant)
	r.GET("/v1/tenants", s.listTenants)
	r.GET("/v1/tenants/:id", s.getTenantByID)
	r.PATCH("/v1/tenants/:id", s.patchTenantByID)
	r.POST("/v1/tenants/:id/suspend", s.suspendTenant)
	r.POST("/v1/tenants/:id/reinstate", s.reinstateTenant)
	r.GET("/v1/signing-keys", s.listSigningKeys)
	r.POST("/v1/signing-keys", s.rotateSigningKey)
	r.POST("/v1/signing-keys/:kid/retire", s.retireSigningKey)
	r.POST("/v1/tokens", s.mintToken)
	r.GET("/v1/tenant", s.getTenant)
	r.PATCH("/v1/tenant", s.patchTenant)
	r.POST("/v1/keys", s.createKey)
	r.GET("/v1/keys", s.listKeys)
	r.DELETE("/v1/keys/:id", s.revokeKey)
	r.POST("/v1/topics", s.createTopic)
	r.GET("/v1/topics", s.listTopics)
	r.GET("/v1/topics/:topic", s.getTopic)
	r.DELETE("/v1/topics/:topic", s.deleteTopic)
	s.webhookRoutes(r)
	s.readModelRoutes(r)
}

// TopicView is a topic as the API shows it.
type TopicView struct {
	Name        string `json:"name"`
	Partitions  int32  `json:"partitions"`
	KafkaTopic  string `json:"kafka_topic"`
	RetentionMs int64  `json:"retention_ms"`
	CreatedAt   string `json:"created_at"`
	Epoch       string `json:"epoch"`
}

func (s *Service) topicView(t controlstate.Topic) TopicView {
	tn, _ := s.State().Tenant(t.Tenant)
	return TopicView{Name: t.Name, Partitions: t.Partitions, KafkaTopic: t.KafkaTopic,
		RetentionMs: s.RetentionMs(tn.Plan), CreatedAt: t.CreatedAt.UTC().Format(timeFormat), Epoch: t.Epoch}
}

const timeFormat = "2006-01-02T15:04:05.000Z07:00"

type tenantView struct {
	ID           string `json:"id"`
	Plan         string `json:"plan"`
	StrictTopics bool   `json:"strict_topics"`
	RetentionMs  int64  `json:"retention_ms"`
	CreatedAt    string `json:"created_at"`
	Suspended    bool   `json:"suspended"`
	// SuspendedReason is the operator's reason while suspended.
	SuspendedReason string `json:"suspended_reason,omitempty"`
	AdminKey        string `json:"admin_key,omitempty"`
}

func (s *Service) tenantView(t controlstate.Tenant) tenantView {
	return tenantView{ID: t.ID, Plan: t.Plan, StrictTopics: t.StrictTopics, RetentionMs: s.RetentionMs(t.Plan),
		CreatedAt: t.CreatedAt.UTC().Format(timeFormat), Suspended: t.Suspended, SuspendedReason: t.SuspendedReason}
}

type keyView struct {
	ID           string                  `json:"id"`
	Key          string                  `json:"key,omitempty"`
	Name         string                  `json:"name"`
	Role         string                  `json:"role,omitempty"`
	Capabilities []capability.Capability `json:"capabilities"`
	Prefix       string                  `json:"prefix"`
	CreatedAt    string                  `json:"created_at"`
	RevokedAt    *string                 `json:"revoked_at,omitempty"`
}

func keyViewOf(k controlstate.Key) keyView {
	caps := k.Capabilities
	if k.Role != "" {
		caps = capability.ForRole(k.Role)
	}
	v := keyView{ID: k.ID, Name: k.Name, Role: k.Role, Capabilities: caps, Prefix: k.Prefix, CreatedAt: k.CreatedAt.UTC().Format(timeFormat)}
	if k.RevokedAt != nil {
		r := k.RevokedAt.UTC().Format(timeFormat)
		v.RevokedAt = &r
	}
	return v
}

func (s *Service) fail(c *gin.Context, err error) { httpapi.Abort(c, s.log, err) }

func (s *Service) createTenant(c *gin.Context) {
	if !auth.RequireOperator(c) {
		return
	}
	var req struct {
		ID   string `json:"id"`
		Plan string `json:"plan"`
	}
	if err := httpapi.BindJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	t, key, err := s.CreateTenant(c.Request.Context(), req.ID, req.Plan)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := s.tenantView(t)
	v.AdminKey = key
	c.JSON(http.StatusCreated, v)
}

func (s *Service) getTenant(c *gin.Context) {
	p := auth.PrincipalOf(c)
	if p.Operator {
		s.fail(c, httpapi.Errorf(httpapi.CodeForbidden, "the operator key belongs to no tenant: use GET /v1/tenants/{id}"))
		return
	}
	t, ok := s.State().Tenant(p.Tenant)
	if !ok {
		s.fail(c, httpapi.Errorf(httpapi.CodeTenantNotFound, "tenant not found"))
		return
	}
	c.JSON(http.StatusOK, s.tenantView(t))
}

func (s *Service) patchTenant(c *gin.Context) {
	p, ok := auth.Require(c, capability.OpTenantSettings)
	if !ok {
		return
	}
	var req struct {
		StrictTopics *bool `json:"strict_topics"`
	}
	if err := httpapi.BindJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	if req.StrictTopics == nil {
		s.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "nothing to change: send {\"strict_topics\": true|false}"))
		return
	}
	t, err := s.SetStrictTopics(c.Request.Context(), p.Tenant, *req.StrictTopics)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.tenantView(t))
}

func (s *Service) createKey(c *gin.Context) {
	p, ok := auth.Require(c, capability.OpKeysManage)
	if !ok {
		return
	}
	var req struct {
		Name         string                  `json:"name"`
		Role         string                  `json:"role"`
		Capabilities []capability.Capability `json:"capabilities"`
	}
	if err := httpapi.BindJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	k, plain, err := s.CreateKey(c.Request.Context(), p, req.Name, req.Role, req.Capabilities)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := keyViewOf(k)
	v.Key = plain
	c.JSON(http.StatusCreated, v)
}

func (s *Service) listKeys(c *gin.Context) {
	p, ok := auth.Require(c, capability.OpKeysManage)
	if !ok {
		return
	}
	keys := s.State().Keys(p.Tenant)
	out := make([]keyView, 0, len(keys))
	for _, k := range keys {
		out = append(out, keyViewOf(k))
	}
	c.JSON(http.StatusOK, gin.H{"keys": out})
}

func (s *Service) revokeKey(c *gin.Context) {
	p, ok := auth.Require(c, capability.OpKeysManage)
	if !ok {
		return
	}
	if err := s.RevokeKey(c.Request.Context(), p, c.Param("id")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Service) createTopic(c *gin.Context) {
	if !auth.RequireSome(c, capability.OpTopicsManage) {
		return
	}
	var req struct {
		Name       string `json:"name"`
		Partitions int    `json:"partitions"`
	}
	if err := httpapi.BindJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	p, ok := auth.RequireOn(c, capability.OpTopicsManage, req.Name, "")
	if !ok {
		return
	}
	t, err := s.CreateTopic(c.Request.Context(), p.Tenant, req.Name, req.Partitions)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, s.topicView(t))
}

// listTopics lists the topics the caller may read (403 when it may read
// none at all).
func (s *Service) listTopics(c *gin.Context) {
	p := auth.PrincipalOf(c)
	if !auth.RequireSome(c, capability.OpTopicsRead) {
		return
	}
	ts := s.State().Topics(p.Tenant)
	out := make([]TopicView, 0, len(ts))
	for _, t := range ts {
		if p.Can(capability.OpTopicsRead, t.Name, "") {
			out = append(out, s.topicView(t))
		}
	}
	c.JSON(http.StatusOK, gin.H{"topics": out})
}

func (s *Service) getTopic(c *gin.Context) {
	p, ok := auth.RequireOn(c, capability.OpTopicsRead, c.Param("topic"), "")
	if !ok {
		return
	}
	t, found := s.State().Topic(p.Tenant, c.Param("topic"))
	if !found {
		s.fail(c, httpapi.Errorf(httpapi.CodeTopicNotFound, "topic %q not found", c.Param("topic")))
		return
	}
	c.JSON(http.StatusOK, s.topicView(t))
}

func (s *Service) deleteTopic(c *gin.Context) {
	p, ok := auth.RequireOn(c, capability.OpTopicsManage, c.Param("topic"), "")
	if !ok {
		return
	}
	if err := s.DeleteTopic(c.Request.Context(), p.Tenant, c.Param("topic")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

func (s *Service) listTenants(c *gin.Context) {
	if !auth.RequireOperator(c) {
		return
	}
	ts := s.State().Tenants()
	out := make([]tenantView, 0, len(ts))
	for _, t := range ts {
		out = append(out, s.tenantView(t))
	}
	c.JSON(http.StatusOK, gin.H{"tenants": out})
}

func (s *Service) getTenantByID(c *gin.Context) {
	if !auth.RequireOperator(c) {
		return
	}
	t, ok := s.State().Tenant(c.Param("id"))
	if !ok {
		s.fail(c, httpapi.Errorf(httpapi.CodeTenantNotFound, "tenant %q not found", c.Param("id")))
		return
	}
	c.JSON(http.StatusOK, s.tenantView(t))
}

func (s *Service) patchTenantByID(c *gin.Context) {
	if !auth.RequireOperator(c) {
		return
	}
	var req struct {
		Plan string `json:"plan"`
	}
	if err := httpapi.BindJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	t, err := s.SetPlan(c.Request.Context(), c.Param("id"), req.Plan)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.tenantView(t))
}

func (s *Service) suspendTenant(c *gin.Context) { s.setSuspended(c, true) }

func (s *Service) reinstateTenant(c *gin.Context) { s.setSuspended(c, false) }

func (s *Service) setSuspended(c *gin.Context, suspended bool) {
	if !auth.RequireOperator(c) {
		return
	}
	var req struct {
		Reason string `json:"reason"`
	}
	if err := httpapi.BindOptionalJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	if req.Reason == "" {
		req.Reason = "billing"
	}
	t, err := s.SetSuspended(c.Request.Context(), c.Param("id"), suspended, req.Reason)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, s.tenantView(t))
}

type signingKeyView struct {
	KID       string `json:"kid"`
	CreatedAt string `json:"created_at"`
	Retired   bool   `json:"retired"`
	Current   bool   `json:"current"`
	// Exposed: its seed is in the control topic's history in plaintext
	// (written by a version before secrets at rest).
	Exposed bool `json:"exposed"`
	// KEK is the id of the key-encryption key sealing its seed.
	KEK string `json:"kek,omitempty"`
}

func (s *Service) listSigningKeys(c *gin.Context) {
	if !auth.RequireOperator(c) {
		return
	}
	cur, _ := s.State().CurrentSigningKey()
	keys := s.State().SigningKeys()
	out := make([]signingKeyView, 0, len(keys))
	for _, k := range keys {
		v := signingKeyView{KID: k.KID, CreatedAt: k.CreatedAt.UTC().Format(timeFormat), Retired: k.Retired, Current: k.KID == cur.KID, Exposed: k.Exposed}
		if k.Sealed != nil {
			v.KEK = k.Sealed.KEK
		}
		out = append(out, v)
	}
	c.JSON(http.StatusOK, gin.H{"signing_keys": out})
}

func (s *Service) rotateSigningKey(c *gin.Context) {
	if !auth.RequireOperator(c) {
		return
	}
	kid, err := s.RotateSigningKey(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, gin.H{"kid": kid})
}

func (s *Service) retireSigningKey(c *gin.Context) {
	if !auth.RequireOperator(c) {
		return
	}
	if err := s.RetireSigningKey(c.Request.Context(), c.Param("kid")); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// mintToken is the token broker: a backend holding a key mints a short-
// lived, downscoped token for a browser.
func (s *Service) mintToken(c *gin.Context) {
	p, ok := auth.Require(c, capability.OpTokensMint)
	if !ok {
		return
	}
	var req struct {
		TTLSeconds   int                     `json:"ttl_seconds"`
		Capabilities []capability.Capability `json:"capabilities"`
	}
	if err := httpapi.BindOptionalJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	if req.TTLSeconds < 0 || int64(req.TTLSeconds) > int64(s.cfg.Tokens.MaxTTL/time.Second) {
		s.fail(c, httpapi.Errorf(httpapi.CodeValidation, "ttl_seconds must be between 1 and %d (tokens.max_ttl), or 0 or absent for the default of %d (tokens.default_ttl), got %d",
			int64(s.cfg.Tokens.MaxTTL/time.Second), int64(s.cfg.Tokens.DefaultTTL/time.Second), req.TTLSeconds))
		return
	}
	now := s.now()
	tok, exp, err := s.MintToken(p, time.Duration(req.TTLSeconds)*time.Second, req.Capabilities, now)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"token": tok, "expires_at": exp.UTC().Format(timeFormat), "ttl_seconds": int(ttlOf(req.TTLSeconds, s.cfg.Tokens.DefaultTTL).Seconds())})
}

// ttlOf is the ttl a mint request asked for (seconds; 0 = def).
func ttlOf(seconds int, def time.Duration) time.Duration {
	if seconds == 0 {
		return def
	}
	return time.Duration(seconds) * time.Second
}
