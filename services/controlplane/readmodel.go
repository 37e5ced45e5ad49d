package controlplane

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/msgmesh/msgmesh/platform/auth"
	"github.com/msgmesh/msgmesh/platform/capability"
	"github.com/msgmesh/msgmesh/platform/cursor"
	"github.com/msgmesh/msgmesh/platform/httpapi"
	"github.com/msgmesh/msgmesh/platform/readmodel"
)

// SetReadModel enables GET /v1/audit and GET /v1/webhooks/{id}/attempts,
// answered from store. Call before serving.
func (s *Service) SetReadModel(store readmodel.Store) { s.readModel = store }

// readModelRoutes registers the read API (issue 14):
//
//	GET /v1/audit?since=&until=&type=&limit=&after=                                 keys.manage
//	GET /v1/webhooks/{id}/attempts?since=&until=&outcome=&status=&cursor=&limit=&after=  as GET /v1/webhooks/{id}
//
// Both answer newest first, {"events"|"attempts": [...], "next": <page token> | null,
// "source": "postgres" | "memory"}.
func (s *Service) readModelRoutes(r gin.IRouter) {
	r.GET("/v1/audit", s.listAudit)
	r.GET("/v1/webhooks/:id/attempts", s.listAttempts)
}

// pageQuery reads the parameters both listings share.
func pageQuery(c *gin.Context) (since, until time.Time, limit int, after *readmodel.Key, err error) {
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &since}, {"until", &until}} {
		if v := c.Query(p.name); v != "" {
			t, perr := time.Parse(time.RFC3339Nano, v)
			if perr != nil {
				return since, until, 0, nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "%s: want an RFC 3339 time such as 2026-12-01T19:00:00Z, got %q", p.name, v)
			}
			*p.to = t
		}
	}
	if v := c.Query("limit"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > readmodel.MaxLimit {
			return since, until, 0, nil, httpapi.Errorf(httpapi.CodeInvalidRequest, "limit: want 1..%d, got %q", readmodel.MaxLimit, v)
		}
		limit = n
	}
	if v := c.Query("after"); v != "" {
		k, perr := readmodel.ParseKey(v)
		if perr != nil {
			return since, until, 0, nil, httpapi.Wrap(httpapi.CodeInvalidRequest, perr, "after: not the next value of a previous page")
		}
		after = k
	}
	return since, until, limit, after, nil
}

func nextOf(k *readmodel.Key) any {
	if k == nil {
		return nil
	}
	return k.Encode()
}

func (s *Service) readModelErr(c *gin.Context, err error) {
	s.fail(c, httpapi.Wrap(httpapi.CodeReadModelUnavailable, err, "the read model's database is not reachable; retry with backoff"))
}

func (s *Service) listAudit(c *gin.Context) {
	p, ok := auth.Require(c, capability.OpKeysManage)
	if !ok {
		return
	}
	if s.readModel == nil {
		s.fail(c, httpapi.Errorf(httpapi.CodeNotFound, "the audit log is not served by this node"))
		return
	}
	since, until, limit, after, err := pageQuery(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	page, err := s.readModel.Audit(c.Request.Context(), p.Tenant, readmodel.AuditQuery{Since: since, Until: until, Type: c.Query("type"), Limit: limit, After: after})
	if err != nil {
		s.readModelErr(c, err)
		return
	}
	if page.Events == nil {
		page.Events = []readmodel.AuditEvent{}
	}
	for i := range page.Events {
		if page.Events[i].Details == nil {
			page.Events[i].Details = map[string]any{}
		}
	}
	c.JSON(http.StatusOK, gin.H{"events": page.Events, "next": nextOf(page.Next), "source": s.readModel.Source()})
}

var outcomes = map[string]bool{readmodel.OutcomeDelivered: true, readmodel.OutcomeTemporary: true,
	readmodel.OutcomePermanent: true, readmodel.OutcomeGuardRefused: true}

func (s *Service) listAttempts(c *gin.Context) {
	w, ok := s.webhookOf(c)
	if !ok {
		return
	}
	if s.readModel == nil {
		s.fail(c, httpapi.Errorf(httpapi.CodeNotFound, "webhook attempts are not served by this node"))
		return
	}
	since, until, limit, after, err := pageQuery(c)
	if err != nil {
		s.fail(c, err)
		return
	}
	q := readmodel.AttemptQuery{Since: since, Until: until, Limit: limit, After: after, Status: -1}
	if v := c.Query("outcome"); v != "" {
		if !outcomes[v] {
			s.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "outcome: want delivered, temporary, permanent or guard_refused, got %q", v))
			return
		}
		q.Outcome = v
	}
	if v := c.Query("status"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 0 || n > 599 {
			s.fail(c, httpapi.Errorf(httpapi.CodeInvalidRequest, "status: want an HTTP status code (0 for no answer), got %q", v))
			return
		}
		q.Status = n
	}
	if v := c.Query("cursor"); v != "" {
		if _, perr := cursor.Parse(v); perr != nil {
			s.fail(c, httpapi.Errorf(httpapi.CodeInvalidCursor, "cursor: want a message cursor <partition>-<offset>, got %q", v))
			return
		}
		q.Cursor = v
	}
	page, err := s.readModel.Attempts(c.Request.Context(), w.Tenant, w.ID, q)
	if err != nil {
		if errors.Is(err, c.Request.Context().Err()) && c.Request.Context().Err() != nil {
			return
		}
		s.readModelErr(c, err)
		return
	}
	if page.Attempts == nil {
		page.Attempts = []readmodel.Attempt{}
	}
	c.JSON(http.StatusOK, gin.H{"attempts": page.Attempts, "next": nextOf(page.Next), "source": s.readModel.Source()})
}
