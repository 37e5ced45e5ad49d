package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/controlstate"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/kafkaclient"
	"github.com/msgmesh/msgmesh/platform/webhookstore"
)

// SetWebhooks enables /v1/webhooks with the process's webhook store: its
// SSRF guard checks targets at registration (and re-enabling), its
// dead-letter reader serves inspection and replay, and it makes each
// tenant's retry and dead-letter topics. Call before serving.
func (s *Service) SetWebhooks(store *webhookstore.Store) {
	s.webhooks = store
}

// webhookRoutes registers the webhook API (spec section 2, "Webhook"):
//
//	POST   /v1/webhooks                 webhooks.manage on the topic (and room): {"topic","url","room"?} → 201 webhook with "secret" (shown once)
//	GET    /v1/webhooks                 {"webhooks": [...]} the caller may manage (never the secret)
//	GET    /v1/webhooks/{id}            webhook
//	PATCH  /v1/webhooks/{id}            {"enabled"?: bool, "url"?: string}; enabling re-checks the target
//	DELETE /v1/webhooks/{id}            204; final (its consumer group goes)
//	GET    /v1/webhooks/{id}/dead-letters?max=     one-shot inspection
//	POST   /v1/webhooks/{id}/dead-letters/replay   {"cursors"?: [DLQ cursors]} (all when omitted)
func (s *Service) webhookRoutes(r gin.IRouter) {
	r.POST("/v1/webhooks", s.createWebhook)
	r.GET("/v1/webhooks", s.listWebhooks)
	r.GET("/v1/webhooks/:id", s.getWebhook)
	r.PATCH("/v1/webhooks/:id", s.patchWebhook)
	r.DELETE("/v1/webhooks/:id", s.deleteWebhook)
	r.GET("/v1/webhooks/:id/dead-letters", s.inspectDeadLetters)
	r.POST("/v1/webhooks/:id/dead-letters/replay", s.replayDeadLetters)
}

// WebhookView is a webhook as the API shows it.
type WebhookView struct {
	ID    string  `json:"id"`
	Topic string  `json:"topic"`
	URL   string  `json:"url"`
	Room  *string `json:"room"`
	// Secret is the signing secret, in the create answer only.
	Secret  string `json:"secret,omitempty"`
	Enabled bool   `json:"enabled"`
	// DisabledReason says why a disabled webhook was disabled.
	DisabledReason string `json:"disabled_reason,omitempty"`
	// Group is the Kafka consumer group delivering it (its lag is the
	// webhook's backlog).
	Group     string `json:"group"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func webhookViewOf(w controlstate.Webhook) WebhookView {
	v := WebhookView{ID: w.ID, Topic: w.Topic, URL: w.URL, Enabled: w.Enabled, DisabledReason: w.DisabledReason,
		Group: w.Group, CreatedAt: w.CreatedAt.UTC().Format(timeFormat), UpdatedAt: w.UpdatedAt.UTC().Format(timeFormat)}
	if w.Room != "" {
		room := w.Room
		v.Room = &room
	}
	return v
}

// checkTarget runs the SSRF guard's registration check: 422
// webhook_target_refused with the reason.
func (s *Service) checkTarget(ctx context.Context, raw string) error {
	if raw == "" {
		return httpapi.Errorf(httpapi.CodeValidation, "url is required (a public https URL)")
	}
	if err := tooLong("url", raw, MaxURLBytes); err != nil {
		return err
	}
	if err := s.webhooks.Guard().CheckTarget(ctx, raw); err != nil {
		return httpapi.Errorf(httpapi.CodeTargetRefused, "webhook url refused: %s", webhookstore.RedactError(err))
	}
	return nil
}

// NewWebhookSecret returns a Standard Webhooks secret: "whsec_" + base64
// of 32 random bytes.
func NewWebhookSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return "whsec_" + base64.StdEncoding.EncodeToString(b[:])
}

// CreateWebhook registers a webhook on tenant's topic. Delivery starts at
// the topic's end now: the webhook's consumer group gets those offsets
// committed before the event is appended, so its lag shows at once.
func (s *Service) CreateWebhook(ctx context.Context, tenant, topic, url, room string) (controlstate.Webhook, error) {
	t, ok := s.State().Topic(tenant, topic)
	if !ok {
		return controlstate.Webhook{}, httpapi.Errorf(httpapi.CodeTopicNotFound, "topic %q not found: create it first", topic)
	}
	if err := tooLong("room", room, s.cfg.Publish.MaxRoomLength); err != nil {
		return controlstate.Webhook{}, err
	}
	if err := s.checkTarget(ctx, url); err != nil {
		return controlstate.Webhook{}, err
	}
	if _, err := s.webhooks.EnsureTopics(ctx, tenant); err != nil {
		return controlstate.Webhook{}, httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not make the webhook's retry and dead-letter topics")
	}
	if err := s.EnsureKafkaTopic(ctx, t); err != nil {
		return controlstate.Webhook{}, err
	}
	id := auth.NewID("wh_")
	group := s.webhooks.Names().WebhookGroup(tenant, id)
	ends, err := s.topicEnds(ctx, t.KafkaTopic)
	if err != nil {
		return controlstate.Webhook{}, httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not read the topic's end offsets")
	}
	start := map[int32]int64{}
	var offs kadm.Offsets
	ends.Each(func(o kadm.ListedOffset) {
		start[o.Partition] = o.Offset
		offs.Add(kadm.Offset{Topic: t.KafkaTopic, Partition: o.Partition, At: o.Offset, LeaderEpoch: -1})
	})
	resp, err := s.adm.CommitOffsets(ctx, group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return controlstate.Webhook{}, httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not start the webhook's consumer group")
	}
	// Only the sealed secret enters Kafka (secrets at rest).
	sealed, err := s.clog.SealWebhookSecret(ctx, tenant, id, NewWebhookSecret())
	if err != nil {
		return controlstate.Webhook{}, err
	}
	_, err = s.clog.Append(ctx, controlstate.TypeWebhookCreated, controlstate.WebhookCreatedData{
		Tenant: tenant, ID: id, Topic: topic, KafkaTopic: t.KafkaTopic, URL: url, Room: room,
		SealedSecret: sealed, Group: group, StartOffsets: start,
	})
	if err := appendErr(err, httpapi.CodeTopicNotFound, "topic "+strconv.Quote(topic)); err != nil {
		return controlstate.Webhook{}, err
	}
	w, _ := s.State().Webhook(tenant, id)
	return w, nil
}

// topicEnds lists topic's end offsets. A topic made a moment ago can be
// unknown to the broker that answers (KRaft propagates a new topic to the
// brokers after the controller acknowledges it): that answer is retried
// with backoff until ctx (the request's timeout) ends, 10 s at most.
func (s *Service) topicEnds(ctx context.Context, topic string) (kadm.ListedOffsets, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b := kafkaclient.RetryBackOff()
	for {
		ends, err := s.adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		if err == nil || !errors.Is(err, kerr.UnknownTopicOrPartition) {
			return ends, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (the broker still did not know the topic when the request timed out: %w)", err, ctx.Err())
		case <-time.After(b.NextBackOff()):
		}
	}
}

// SetWebhook enables or disables webhook id, optionally changing its URL.
// Enabling re-checks the target; delivery resumes where it stopped.
func (s *Service) SetWebhook(ctx context.Context, w controlstate.Webhook, enabled bool, url string) (controlstate.Webhook, error) {
	if enabled == w.Enabled && (url == "" || url == w.URL) {
		return w, nil // nothing changes: nothing to append
	}
	if url != "" || enabled {
		target := url
		if target == "" {
			target = w.URL
		}
		if err := s.checkTarget(ctx, target); err != nil {
			return controlstate.Webhook{}, err
		}
	}
	var err error
	if enabled {
		_, err = s.clog.Append(ctx, controlstate.TypeWebhookEnabled, controlstate.WebhookEnabledData{Tenant: w.Tenant, ID: w.ID, URL: url})
	} else {
		reason := w.DisabledReason
		if w.Enabled || reason == "" {
			reason = "disabled through the API"
		}
		_, err = s.clog.Append(ctx, controlstate.TypeWebhookDisabled, controlstate.WebhookDisabledData{Tenant: w.Tenant, ID: w.ID, Reason: reason, URL: url,
			Offsets: s.webhookOffsets(ctx, w)})
	}
	if err := appendErr(err, httpapi.CodeWebhookNotFound, "webhook "+strconv.Quote(w.ID)); err != nil {
		return controlstate.Webhook{}, err
	}
	out, ok := s.State().Webhook(w.Tenant, w.ID)
	if !ok {
		return controlstate.Webhook{}, httpapi.Errorf(httpapi.CodeWebhookNotFound, "webhook %q was deleted meanwhile", w.ID)
	}
	return out, nil
}

// webhookOffsets is w's group's committed offsets on its Kafka topic (nil
// when Kafka cannot say), recorded in webhook.disabled.
func (s *Service) webhookOffsets(ctx context.Context, w controlstate.Webhook) map[int32]int64 {
	if s.webhooks == nil {
		return nil
	}
	return s.webhooks.CommittedOffsets(ctx, w)
}

// webhookOf loads the webhook named by the path and checks that the
// caller may manage it.
func (s *Service) webhookOf(c *gin.Context) (controlstate.Webhook, bool) {
	if s.webhooks == nil {
		s.fail(c, httpapi.Errorf(httpapi.CodeNotFound, "webhooks are not served by this node"))
		return controlstate.Webhook{}, false
	}
	p := auth.PrincipalOf(c)
	if !auth.RequireSome(c, capability.OpWebhooksManage) {
		return controlstate.Webhook{}, false
	}
	w, ok := s.State().Webhook(p.Tenant, c.Param("id"))
	if !ok {
		s.fail(c, httpapi.Errorf(httpapi.CodeWebhookNotFound, "webhook %q not found", c.Param("id")))
		return controlstate.Webhook{}, false
	}
	if _, ok := auth.RequireOn(c, capability.OpWebhooksManage, w.Topic, w.Room); !ok {
		return controlstate.Webhook{}, false
	}
	return w, true
}

func (s *Service) createWebhook(c *gin.Context) {
	if s.webhooks == nil {
		s.fail(c, httpapi.Errorf(httpapi.CodeNotFound, "webhooks are not served by this node"))
		return
	}
	if !auth.RequireSome(c, capability.OpWebhooksManage) {
		return
	}
	var req struct {
		Topic string `json:"topic"`
		URL   string `json:"url"`
		Room  string `json:"room"`
	}
	if err := httpapi.BindJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	if req.Topic == "" {
		s.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "topic is required"))
		return
	}
	p, ok := auth.RequireOn(c, capability.OpWebhooksManage, req.Topic, req.Room)
	if !ok {
		return
	}
	w, err := s.CreateWebhook(c.Request.Context(), p.Tenant, req.Topic, req.URL, req.Room)
	if err != nil {
		s.fail(c, err)
		return
	}
	v := webhookViewOf(w)
	v.Secret = w.Secret
	c.JSON(http.StatusCreated, v)
}

func (s *Service) listWebhooks(c *gin.Context) {
	if !auth.RequireSome(c, capability.OpWebhooksManage) {
		return
	}
	p := auth.PrincipalOf(c)
	out := []WebhookView{}
	for _, w := range s.State().Webhooks(p.Tenant) {
		if p.Can(capability.OpWebhooksManage, w.Topic, w.Room) {
			out = append(out, webhookViewOf(w))
		}
	}
	c.JSON(http.StatusOK, gin.H{"webhooks": out})
}

func (s *Service) getWebhook(c *gin.Context) {
	w, ok := s.webhookOf(c)
	if !ok {
		return
	}
	c.JSON(http.StatusOK, webhookViewOf(w))
}

func (s *Service) patchWebhook(c *gin.Context) {
	w, ok := s.webhookOf(c)
	if !ok {
		return
	}
	var req struct {
		Enabled *bool   `json:"enabled"`
		URL     *string `json:"url"`
	}
	if err := httpapi.BindJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	if req.Enabled == nil && req.URL == nil {
		s.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "nothing to change: send {\"enabled\": true} and/or {\"url\": \"https://...\"}"))
		return
	}
	enabled := w.Enabled
	if req.Enabled != nil {
		enabled = *req.Enabled
	}
	url := ""
	if req.URL != nil {
		if *req.URL == "" {
			s.fail(c, httpapi.Errorf(httpapi.CodeValidation, "url must not be empty"))
			return
		}
		url = *req.URL
	}
	out, err := s.SetWebhook(c.Request.Context(), w, enabled, url)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, webhookViewOf(out))
}

func (s *Service) deleteWebhook(c *gin.Context) {
	w, ok := s.webhookOf(c)
	if !ok {
		return
	}
	_, err := s.clog.Append(c.Request.Context(), controlstate.TypeWebhookDeleted, controlstate.WebhookDeletedData{Tenant: w.Tenant, ID: w.ID})
	if err := appendErr(err, httpapi.CodeWebhookNotFound, "webhook "+strconv.Quote(w.ID)); err != nil {
		s.fail(c, err)
		return
	}
	c.Status(http.StatusNoContent)
}

// inspectDeadLetters is the one-shot inspection: what it returns is not
// returned again (spec section 2).
func (s *Service) inspectDeadLetters(c *gin.Context) {
	w, ok := s.webhookOf(c)
	if !ok {
		return
	}
	max := 100
	if q := c.Query("max"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 1000 {
			s.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "max must be 1..1000"))
			return
		}
		max = n
	}
	dls, err := s.webhooks.DeadLetters().Inspect(c.Request.Context(), w, max)
	if err != nil {
		s.fail(c, httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "could not read the dead letters; retry"))
		return
	}
	c.JSON(http.StatusOK, gin.H{"dead_letters": dls, "one_shot": true, "note": webhookstore.InspectNote})
}

func (s *Service) replayDeadLetters(c *gin.Context) {
	w, ok := s.webhookOf(c)
	if !ok {
		return
	}
	var req struct {
		Cursors []string `json:"cursors"`
	}
	if err := httpapi.BindOptionalJSON(c, &req); err != nil {
		s.fail(c, err)
		return
	}
	if req.Cursors != nil && len(req.Cursors) == 0 {
		s.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "cursors is empty: omit it to replay every dead letter"))
		return
	}
	if len(req.Cursors) > webhookstore.MaxReplay {
		s.fail(c, httpapi.Errorf(httpapi.CodePayloadTooLarge, "at most %d cursors per replay", webhookstore.MaxReplay))
		return
	}
	t, ok := s.State().Topic(w.Tenant, w.Topic)
	if !ok {
		s.fail(c, httpapi.Errorf(httpapi.CodeTopicNotFound, "the webhook's topic %q no longer exists", w.Topic))
		return
	}
	res, err := s.webhooks.DeadLetters().Replay(c.Request.Context(), w, t.KafkaTopic, req.Cursors)
	if err != nil {
		s.fail(c, httpapi.Wrap(httpapi.CodeKafkaUnavailable, err, "the replay did not complete; messages replayed before the failure stay replayed"))
		return
	}
	c.JSON(http.StatusOK, res)
}
