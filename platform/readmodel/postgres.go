package readmodel

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Postgres is the read model in PostgreSQL (pgx/v5 pool).
type Postgres struct {
	pool *pgxpool.Pool
}

// OpenPostgres connects a pool to url (postgres.url). It does not wait for
// the database: Migrate does, and the Projector retries it.
func OpenPostgres(ctx context.Context, url string) (*Postgres, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres.url: %w", err)
	}
	cfg.MaxConns = 8
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return &Postgres{pool: pool}, nil
}

// Close releases the pool.
func (p *Postgres) Close() { p.pool.Close() }

// Pool is the connection pool (tests).
func (p *Postgres) Pool() *pgxpool.Pool { return p.pool }

// Source is SourcePostgres.
func (p *Postgres) Source() string { return SourcePostgres }

// Migrate applies the embedded migrations not applied yet, in name order,
// each in its own transaction, under an advisory lock (nodes starting
// together migrate once).
func (p *Postgres) Migrate(ctx context.Context) error {
	conn, err := p.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	defer conn.Release()
	const lock = 7_146_051_914 // "msgmesh read model"
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", lock); err != nil {
		return fmt.Errorf("postgres: migration lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", lock) //nolint:errcheck
	if _, err := conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	files, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(files)
	for _, f := range files {
		name := strings.TrimPrefix(f, "migrations/")
		var done bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE name = $1)", name).Scan(&done); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if done {
			continue
		}
		sql, err := migrations.ReadFile(f)
		if err != nil {
			return err
		}
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, string(sql)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO schema_migrations (name) VALUES ($1)", name)
			return err
		})
		if err != nil {
			return fmt.Errorf("postgres: migration %s: %w", name, err)
		}
	}
	return nil
}

// Positions reads projector_offsets.
func (p *Postgres) Positions(ctx context.Context) (map[string]map[int32]int64, error) {
	rows, err := p.pool.Query(ctx, "SELECT topic, partition, next_offset FROM projector_offsets")
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	defer rows.Close()
	out := map[string]map[int32]int64{}
	for rows.Next() {
		var t string
		var part int32
		var next int64
		if err := rows.Scan(&t, &part, &next); err != nil {
			return nil, fmt.Errorf("postgres: %w", err)
		}
		if out[t] == nil {
			out[t] = map[int32]int64{}
		}
		out[t][part] = next
	}
	return out, rows.Err()
}

// Apply writes b's rows, the summary of the attempts it added and the
// positions in one transaction. A row already there (same topic,
// partition, offset) is skipped and not counted again.
func (p *Postgres) Apply(ctx context.Context, b Batch) error {
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		for _, e := range b.Entries {
			switch {
			case e.Audit != nil:
				a := e.Audit
				details, err := json.Marshal(a.Details)
				if err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO audit_events (topic, partition, "offset", tenant, time, type, actor, summary, details)
					VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`,
					e.Pos.Topic, e.Pos.Partition, e.Pos.Offset, a.Tenant, a.Time, a.Type, a.Actor, a.Summary, details); err != nil {
					return err
				}
			case e.Attempt != nil:
				a := e.Attempt
				tag, err := tx.Exec(ctx, `INSERT INTO webhook_attempts (topic, partition, "offset", tenant, webhook_id, message_topic, cursor, message_id,
					attempt, outcome, status, error, duration_ms, time) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) ON CONFLICT DO NOTHING`,
					e.Pos.Topic, e.Pos.Partition, e.Pos.Offset, a.Tenant, a.WebhookID, a.Topic, a.Cursor, a.MessageID,
					a.Attempt, a.Outcome, a.Status, a.Error, a.DurationMs, a.Time)
				if err != nil {
					return err
				}
				if tag.RowsAffected() == 0 {
					continue
				}
				col := map[string]string{OutcomeDelivered: "delivered", OutcomeTemporary: "temporary", OutcomePermanent: "permanent", OutcomeGuardRefused: "guard_refused"}[a.Outcome]
				if col == "" {
					col = "temporary"
				}
				if _, err := tx.Exec(ctx, `INSERT INTO webhook_summary AS s (tenant, webhook_id, attempts, `+col+`, last_time, last_outcome, last_status)
					VALUES ($1, $2, 1, 1, $3, $4, $5)
					ON CONFLICT (tenant, webhook_id) DO UPDATE SET attempts = s.attempts + 1, `+col+` = s.`+col+` + 1,
					last_time = GREATEST(s.last_time, EXCLUDED.last_time),
					last_outcome = CASE WHEN EXCLUDED.last_time >= s.last_time THEN EXCLUDED.last_outcome ELSE s.last_outcome END,
					last_status = CASE WHEN EXCLUDED.last_time >= s.last_time THEN EXCLUDED.last_status ELSE s.last_status END`,
					a.Tenant, a.WebhookID, a.Time, a.Outcome, a.Status); err != nil {
					return err
				}
			}
		}
		for t, ps := range b.Next {
			for part, next := range ps {
				if _, err := tx.Exec(ctx, `INSERT INTO projector_offsets (topic, partition, next_offset) VALUES ($1, $2, $3)
					ON CONFLICT (topic, partition) DO UPDATE SET next_offset = GREATEST(projector_offsets.next_offset, EXCLUDED.next_offset)`,
					t, part, next); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: %w", err)
	}
	return nil
}

// where builds a WHERE clause from conds, numbering arguments.
type where struct {
	conds []string
	args  []any
}

func (w *where) add(cond string, args ...any) {
	n := len(w.args)
	for i := range args {
		cond = strings.Replace(cond, "?", "$"+strconv.Itoa(n+i+1), 1)
	}
	w.conds = append(w.conds, cond)
	w.args = append(w.args, args...)
}

func (w *where) sql() string { return " WHERE " + strings.Join(w.conds, " AND ") }

func (w *where) keyset(k *Key) {
	if k != nil {
		w.add(`(time, partition, "offset") < (?, ?, ?)`, k.Time, k.Partition, k.Offset)
	}
}

// Audit lists tenant's audit events, newest first.
func (p *Postgres) Audit(ctx context.Context, tenant string, q AuditQuery) (AuditPage, error) {
	limit := limitOf(q.Limit)
	var w where
	w.add("tenant = ?", tenant)
	if !q.Since.IsZero() {
		w.add("time >= ?", q.Since)
	}
	if !q.Until.IsZero() {
		w.add("time < ?", q.Until)
	}
	if q.Type != "" {
		w.add("type = ?", q.Type)
	}
	w.keyset(q.After)
	rows, err := p.pool.Query(ctx, `SELECT topic, partition, "offset", time, type, actor, summary, details FROM audit_events`+w.sql()+
		` ORDER BY time DESC, partition DESC, "offset" DESC LIMIT `+strconv.Itoa(limit+1), w.args...)
	if err != nil {
		return AuditPage{}, fmt.Errorf("postgres: %w", err)
	}
	defer rows.Close()
	page := AuditPage{Events: []AuditEvent{}}
	for rows.Next() {
		var e AuditEvent
		var details []byte
		if err := rows.Scan(&e.Pos.Topic, &e.Pos.Partition, &e.Pos.Offset, &e.Time, &e.Type, &e.Actor, &e.Summary, &details); err != nil {
			return AuditPage{}, fmt.Errorf("postgres: %w", err)
		}
		if err := json.Unmarshal(details, &e.Details); err != nil {
			return AuditPage{}, fmt.Errorf("postgres: details: %w", err)
		}
		e.Time, e.ID, e.Tenant = e.Time.UTC(), idOf(e.Pos), tenant
		page.Events = append(page.Events, e)
	}
	if err := rows.Err(); err != nil {
		return AuditPage{}, fmt.Errorf("postgres: %w", err)
	}
	if len(page.Events) > limit {
		page.Events = page.Events[:limit]
		last := page.Events[limit-1]
		page.Next = &Key{Time: last.Time, Partition: last.Pos.Partition, Offset: last.Pos.Offset}
	}
	return page, nil
}

// Attempts lists the attempts of tenant's webhook, newest first.
func (p *Postgres) Attempts(ctx context.Context, tenant, webhookID string, q AttemptQuery) (AttemptPage, error) {
	limit := limitOf(q.Limit)
	var w where
	w.add("tenant = ?", tenant)
	w.add("webhook_id = ?", webhookID)
	if !q.Since.IsZero() {
		w.add("time >= ?", q.Since)
	}
	if !q.Until.IsZero() {
		w.add("time < ?", q.Until)
	}
	if q.Outcome != "" {
		w.add("outcome = ?", q.Outcome)
	}
	if q.Status >= 0 {
		w.add("status = ?", q.Status)
	}
	if q.Cursor != "" {
		w.add("cursor = ?", q.Cursor)
	}
	w.keyset(q.After)
	rows, err := p.pool.Query(ctx, `SELECT topic, partition, "offset", message_topic, cursor, message_id, attempt, outcome, status, error, duration_ms, time
		FROM webhook_attempts`+w.sql()+` ORDER BY time DESC, partition DESC, "offset" DESC LIMIT `+strconv.Itoa(limit+1), w.args...)
	if err != nil {
		return AttemptPage{}, fmt.Errorf("postgres: %w", err)
	}
	defer rows.Close()
	page := AttemptPage{Attempts: []Attempt{}}
	for rows.Next() {
		a := Attempt{WebhookID: webhookID, Tenant: tenant}
		if err := rows.Scan(&a.Pos.Topic, &a.Pos.Partition, &a.Pos.Offset, &a.Topic, &a.Cursor, &a.MessageID, &a.Attempt, &a.Outcome,
			&a.Status, &a.Error, &a.DurationMs, &a.Time); err != nil {
			return AttemptPage{}, fmt.Errorf("postgres: %w", err)
		}
		a.Time = a.Time.UTC()
		page.Attempts = append(page.Attempts, a)
	}
	if err := rows.Err(); err != nil {
		return AttemptPage{}, fmt.Errorf("postgres: %w", err)
	}
	if len(page.Attempts) > limit {
		page.Attempts = page.Attempts[:limit]
		last := page.Attempts[limit-1]
		page.Next = &Key{Time: last.Time, Partition: last.Pos.Partition, Offset: last.Pos.Offset}
	}
	return page, nil
}

// Summary is a webhook's delivery summary.
type Summary struct {
	Attempts, Delivered, Temporary, Permanent, GuardRefused int64
	LastTime                                                time.Time
	LastOutcome                                             string
	LastStatus                                              int
}

// WebhookSummary reads a webhook's summary row; ok is false without one.
func (p *Postgres) WebhookSummary(ctx context.Context, tenant, webhookID string) (s Summary, ok bool, err error) {
	err = p.pool.QueryRow(ctx, `SELECT attempts, delivered, temporary, permanent, guard_refused, last_time, last_outcome, last_status
		FROM webhook_summary WHERE tenant = $1 AND webhook_id = $2`, tenant, webhookID).
		Scan(&s.Attempts, &s.Delivered, &s.Temporary, &s.Permanent, &s.GuardRefused, &s.LastTime, &s.LastOutcome, &s.LastStatus)
	if errors.Is(err, pgx.ErrNoRows) {
		return Summary{}, false, nil
	}
	return s, err == nil, err
}
