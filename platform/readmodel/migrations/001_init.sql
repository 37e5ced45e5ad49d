-- The read model (platform/readmodel). Every row is keyed by the Kafka
-- record it came from; projector_offsets holds the next offset to read of
-- every topic partition, written in the same transaction as the rows.
CREATE TABLE projector_offsets (
    topic       text   NOT NULL,
    partition   int    NOT NULL,
    next_offset bigint NOT NULL,
    PRIMARY KEY (topic, partition)
);

CREATE TABLE audit_events (
    topic     text        NOT NULL,
    partition int         NOT NULL,
    "offset"  bigint      NOT NULL,
    tenant    text        NOT NULL,
    time      timestamptz NOT NULL,
    type      text        NOT NULL,
    actor     text        NOT NULL,
    summary   text        NOT NULL,
    details   jsonb       NOT NULL,
    PRIMARY KEY (topic, partition, "offset")
);
CREATE INDEX audit_events_page ON audit_events (tenant, time DESC, partition DESC, "offset" DESC);

CREATE TABLE webhook_attempts (
    topic        text        NOT NULL,
    partition    int         NOT NULL,
    "offset"     bigint      NOT NULL,
    tenant       text        NOT NULL,
    webhook_id   text        NOT NULL,
    message_topic text       NOT NULL,
    cursor       text        NOT NULL,
    message_id   text        NOT NULL,
    attempt      int         NOT NULL,
    outcome      text        NOT NULL,
    status       int         NOT NULL,
    error        text        NOT NULL,
    duration_ms  bigint      NOT NULL,
    time         timestamptz NOT NULL,
    PRIMARY KEY (topic, partition, "offset")
);
CREATE INDEX webhook_attempts_page ON webhook_attempts (tenant, webhook_id, time DESC, partition DESC, "offset" DESC);
CREATE INDEX webhook_attempts_cursor ON webhook_attempts (tenant, webhook_id, cursor);

-- One row per webhook: counts by outcome and the last attempt.
CREATE TABLE webhook_summary (
    tenant        text        NOT NULL,
    webhook_id    text        NOT NULL,
    attempts      bigint      NOT NULL DEFAULT 0,
    delivered     bigint      NOT NULL DEFAULT 0,
    temporary     bigint      NOT NULL DEFAULT 0,
    permanent     bigint      NOT NULL DEFAULT 0,
    guard_refused bigint      NOT NULL DEFAULT 0,
    last_time     timestamptz NOT NULL,
    last_outcome  text        NOT NULL,
    last_status   int         NOT NULL,
    PRIMARY KEY (tenant, webhook_id)
);
