package webhookstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/msgmesh/msgmesh/platform/cursor"
)

// Metadata headers of retry and dead-letter records. The record's value is
// the message payload verbatim and its key the webhook id (so one
// webhook's records share a partition); the original headers follow these.
// Publishers cannot set msgmesh-* headers, so they never clash.
const (
	hWebhook    = "msgmesh-webhook-id"
	hTopic      = "msgmesh-topic"
	hMessageID  = "msgmesh-message-id"
	hCursor     = "msgmesh-cursor"
	hRoom       = "msgmesh-room"
	hPublished  = "msgmesh-published-at"
	hAttempt    = "msgmesh-attempt"
	hPosts      = "msgmesh-posts"
	hNotBefore  = "msgmesh-not-before"
	hLastStatus = "msgmesh-last-status"
	hLastError  = "msgmesh-last-error"
	// HeaderReplayOf marks a message republished from the dead letters: the
	// dead letter's cursor in the DLQ topic.
	HeaderReplayOf = "msgmesh-replay-of"
)

// Letter is one message on its way through a webhook: read from the
// tenant topic, or from a retry or dead-letter record (the dispatcher
// writes both; the dead-letter reader reads the latter).
type Letter struct {
	Tenant      string // not encoded: the topics are per tenant
	Webhook     string
	Topic       string // tenant topic name
	MessageID   string
	Cursor      string // the message's cursor in the tenant topic
	Room        []byte // nil: no room
	PublishedAt time.Time
	Value       []byte
	Headers     []kgo.RecordHeader // the message's own headers
	// Attempt is, in a retry record, the number of the attempt to make; in
	// a dead letter, how many the sequence counted (webhooks.max_attempts
	// for temporary failures).
	Attempt int
	// Posts is how many POSTs were made (started) so far, the last one
	// included: Attempt - 1 in a retry record and Attempt in a dead
	// letter, plus one for each attempt made again because a process died
	// before its outcome was recorded (the dispatcher's attempts topic). 0: not recorded
	// (a first attempt, or a record of an earlier version).
	Posts      int
	NotBefore  time.Time
	LastStatus int
	LastError  string
}

// MessageID is the stable id of a message for webhook-id: the topic's
// epoch (it changes when a topic is deleted and made again) and the
// cursor. A replayed message is a new record, so it has a new id.
func MessageID(epoch string, partition int32, offset int64) string {
	if len(epoch) > 16 {
		epoch = epoch[:16]
	}
	return "msg_" + epoch + "_" + cursor.Cursor{Partition: partition, Offset: offset}.String()
}

// LetterOf is the first attempt's letter of record r of tenant's topic
// (epoch: the topic's, see MessageID) for webhook.
func LetterOf(tenant, webhook, topic, epoch string, r *kgo.Record) Letter {
	return Letter{Tenant: tenant, Webhook: webhook, Attempt: 1, Topic: topic, MessageID: MessageID(epoch, r.Partition, r.Offset),
		Cursor: cursor.Cursor{Partition: r.Partition, Offset: r.Offset}.String(), Room: r.Key,
		PublishedAt: r.Timestamp, Value: r.Value, Headers: r.Headers}
}

// Record encodes l as a retry or dead-letter record of kafkaTopic.
func (l Letter) Record(kafkaTopic string) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(l.Headers)+10)
	add := func(k, v string) { h = append(h, kgo.RecordHeader{Key: k, Value: []byte(v)}) }
	add(hWebhook, l.Webhook)
	add(hTopic, l.Topic)
	add(hMessageID, l.MessageID)
	add(hCursor, l.Cursor)
	if l.Room != nil {
		h = append(h, kgo.RecordHeader{Key: hRoom, Value: l.Room})
	}
	add(hPublished, l.PublishedAt.UTC().Format(time.RFC3339Nano))
	add(hAttempt, strconv.Itoa(l.Attempt))
	if l.Posts > 0 {
		add(hPosts, strconv.Itoa(l.Posts))
	}
	if !l.NotBefore.IsZero() {
		add(hNotBefore, strconv.FormatInt(l.NotBefore.UnixMilli(), 10))
	}
	if l.LastStatus != 0 {
		add(hLastStatus, strconv.Itoa(l.LastStatus))
	}
	if l.LastError != "" {
		add(hLastError, l.LastError)
	}
	h = append(h, l.Headers...)
	return &kgo.Record{Topic: kafkaTopic, Key: []byte(l.Webhook), Value: l.Value, Headers: h}
}

// PostsBefore is how many POSTs were made before the attempt l (a letter read
// from the tenant topic or a retry record) is about to make.
func (l Letter) PostsBefore() int {
	if l.Posts > 0 {
		return l.Posts
	}
	return l.Attempt - 1
}

// PostsMade is how many POSTs a dead letter's sequence made.
func (l Letter) PostsMade() int {
	if l.Posts > 0 {
		return l.Posts
	}
	return l.Attempt
}

// ErrNotLetter: a record that is no retry or dead-letter record.
var ErrNotLetter = errors.New("not a webhook retry or dead-letter record")

// ParseLetter decodes a record made by Letter.Record.
func ParseLetter(r *kgo.Record) (Letter, error) {
	var l Letter
	l.Value = r.Value
	var err error
	for _, h := range r.Headers {
		v := string(h.Value)
		switch h.Key {
		case hWebhook:
			l.Webhook = v
		case hTopic:
			l.Topic = v
		case hMessageID:
			l.MessageID = v
		case hCursor:
			l.Cursor = v
		case hRoom:
			l.Room = h.Value
			if l.Room == nil {
				l.Room = []byte{}
			}
		case hPublished:
			l.PublishedAt, err = time.Parse(time.RFC3339Nano, v)
		case hAttempt:
			l.Attempt, err = strconv.Atoi(v)
		case hPosts:
			l.Posts, err = strconv.Atoi(v)
		case hNotBefore:
			var ms int64
			ms, err = strconv.ParseInt(v, 10, 64)
			l.NotBefore = time.UnixMilli(ms)
		case hLastStatus:
			l.LastStatus, err = strconv.Atoi(v)
		case hLastError:
			l.LastError = v
		default:
			if !strings.HasPrefix(h.Key, "msgmesh-") || h.Key == HeaderReplayOf {
				l.Headers = append(l.Headers, h)
			}
		}
		if err != nil {
			return Letter{}, fmt.Errorf("%w: header %s: %v", ErrNotLetter, h.Key, err)
		}
	}
	if l.Webhook == "" || l.MessageID == "" || l.Attempt < 1 {
		return Letter{}, ErrNotLetter
	}
	return l, nil
}
