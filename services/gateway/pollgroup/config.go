package pollgroup

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Defaults applied when the corresponding field is zero.
const (
	// DefaultIdleTimeout is Config.IdleTimeout when zero.
	DefaultIdleTimeout = 30 * time.Second
	// DefaultMaxMembers is Config.MaxMembers when zero.
	DefaultMaxMembers = 1000
	// DefaultMax is Request.Max when zero (records).
	DefaultMax = 100
	// DefaultMaxBytes is Request.MaxBytes when zero (1 MiB).
	DefaultMaxBytes = 1 << 20

	// defaultFetchMaxBytes bounds what one member's client buffers per fetch
	// (franz-go's own default is 50 MiB, too much for a thousand members).
	// ClientOpts may override it.
	defaultFetchMaxBytes = 4 << 20
)

// Config configures a Manager. The zero value of every field but ClientOpts
// is usable; ClientOpts must at least reach the brokers (kgo.SeedBrokers).
type Config struct {
	// ClientOpts are the base franz-go options of every member's client:
	// seed brokers, TLS, SASL, dialer, client ID, fetch sizes. They are
	// applied after pollgroup's tunable defaults (so they may override
	// kgo.FetchMaxBytes, kgo.ClientID, kgo.WithLogger) and before the options
	// pollgroup owns, which always win: kgo.ConsumerGroup, kgo.ConsumeTopics,
	// kgo.DisableAutoCommit, kgo.BlockRebalanceOnPoll,
	// kgo.ConsumeResetOffset (start), the OnPartitions* callbacks and, when
	// SessionTimeout is set, kgo.SessionTimeout and kgo.HeartbeatInterval.
	// Do not pass kgo.InstanceID: set InstanceIDPrefix, which also makes
	// closing members leave explicitly.
	// kgo.FetchMaxWait (franz-go default 5 s) also bounds how late a
	// partition newly assigned by a rebalance is first fetched while another
	// fetch is parked on the same broker; lowering it speeds up handover at
	// the price of more idle fetch requests per member.
	ClientOpts []kgo.Opt

	// IdleTimeout is how long a member may go without a Poll, Commit or
	// batch acknowledgement before the janitor (Run) closes its client and
	// it leaves the group, so that its partitions move to other members and
	// its unacknowledged records are delivered again. A member is never
	// expired while one of its calls is in flight. A batch that is neither
	// Delivered nor Undelivered within IdleTimeout of its Poll returning is
	// treated as Undelivered. Zero means DefaultIdleTimeout (30 s); negative
	// is invalid.
	IdleTimeout time.Duration

	// SessionTimeout is the Kafka group session timeout of each member
	// (session.timeout.ms); the heartbeat interval becomes the smaller of
	// 3 s and a third of it. It must lie within the broker's
	// group.min.session.timeout.ms..group.max.session.timeout.ms (Apache
	// Kafka: 6 s..30 min; kfake: 6 s..5 min). Zero keeps franz-go's default
	// (45 s); negative is invalid. It only matters when a process dies
	// without leaving: a closed or expired member leaves the group at once.
	SessionTimeout time.Duration

	// InstanceIDPrefix, when set, makes every member a static member
	// (KIP-345) with group.instance.id InstanceIDPrefix + "-" +
	// Key.Consumer. A process restarted after a crash then takes its
	// members' places at once (the coordinator replaces the dead member and
	// hands its assignment over without a rebalance), instead of waiting
	// SessionTimeout for Kafka to expire them: the first Poll after the
	// restart gets the backlog within its Wait. A closing or expiring member
	// still leaves at once, with a LeaveGroup naming its instance (franz-go
	// sends none for static members). The prefix must be stable across the
	// process's restarts and unique among the processes serving the same
	// groups (another process with the same prefix and consumer name fences
	// this one); at most 100 characters of [A-Za-z0-9._-]. Empty means
	// dynamic membership: a killed process's members hold their partitions
	// until SessionTimeout.
	InstanceIDPrefix string

	// MaxMembers caps the members held by this process; a Poll that would
	// create one more fails with ErrTooManyMembers. Zero means
	// DefaultMaxMembers (1000); negative is invalid.
	MaxMembers int

	// MaxMembersPerOwner caps the members of one Key.Owner (a tenant), so
	// one tenant cannot take every slot of the process; beyond it Poll fails
	// with ErrTooManyMembers. Zero means no per-owner cap.
	MaxMembersPerOwner int

	// Logger receives member join, leave and expiry at Info, everything
	// else at Debug, and franz-go's own warnings and errors. Record keys
	// and values are never logged. Nil discards.
	Logger *slog.Logger

	// Registerer receives the package's collectors (see New). Nil means
	// the metrics are kept but not registered anywhere; the global
	// registry is never used implicitly.
	Registerer prometheus.Registerer
}

// validate returns every problem of c, joined, or nil.
func (c Config) validate() error {
	var errs []error
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("idle timeout %v is negative", c.IdleTimeout))
	}
	if c.SessionTimeout < 0 {
		errs = append(errs, fmt.Errorf("session timeout %v is negative", c.SessionTimeout))
	}
	if c.MaxMembersPerOwner < 0 {
		errs = append(errs, fmt.Errorf("max members per owner %d is negative", c.MaxMembersPerOwner))
	}
	if c.MaxMembers < 0 {
		errs = append(errs, fmt.Errorf("max members %d is negative", c.MaxMembers))
	}
	if p := c.InstanceIDPrefix; len(p) > 100 || strings.ContainsFunc(p, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-')
	}) {
		errs = append(errs, fmt.Errorf("instance id prefix %q: want at most 100 of [A-Za-z0-9._-]", p))
	}
	return errors.Join(errs...)
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxMembers == 0 {
		c.MaxMembers = DefaultMaxMembers
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Key names one member: a consumer of one topic in one consumer group.
// Group and Topic are the fully qualified Kafka names (for example
// "msgmesh.acme.orders.g1" and "msgmesh.acme.orders"); Consumer is the
// caller's consumer name within the group and may be empty (the group's
// default consumer).
type Key struct {
	Group    string
	Topic    string
	Consumer string
	// Owner is who the member counts against for MaxMembersPerOwner (the
	// tenant); empty is not counted.
	Owner string
}

// String formats k for logs as "group/topic/consumer".
func (k Key) String() string { return k.Group + "/" + k.Topic + "/" + k.Consumer }

func (k Key) validate() error {
	var errs []error
	if k.Group == "" {
		errs = append(errs, errors.New("empty group"))
	}
	if k.Topic == "" {
		errs = append(errs, errors.New("empty topic"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	return nil
}

// Request is one long-poll.
type Request struct {
	// Key names the member; it is created (and joins the group) on its
	// first Poll.
	Key Key

	// Max caps the records returned. Zero means DefaultMax (100);
	// negative is invalid.
	Max int

	// MaxBytes caps the sum of len(Key)+len(Value) of the records returned,
	// in bytes. A single record larger than MaxBytes is returned alone so
	// that it never stalls its partition. Zero means DefaultMaxBytes
	// (1 MiB); negative is invalid.
	MaxBytes int

	// Wait is how long Poll waits for at least one record. It returns as
	// soon as one is available, or with an empty batch when Wait has
	// passed. Zero means answer at once with whatever is already fetched
	// (a member that is still joining its group has nothing); negative is
	// invalid.
	Wait time.Duration

	// Ack is the ID of the member's outstanding batch (Batch.ID of the
	// previous answer) when the client processed it: it is committed and
	// new records are returned. Empty, or any other value, leaves the
	// outstanding batch unacknowledged and Poll returns it again.
	Ack string
}

func (r Request) normalize() (Request, error) {
	if err := r.Key.validate(); err != nil {
		return r, err
	}
	var errs []error
	if r.Max < 0 {
		errs = append(errs, fmt.Errorf("max %d is negative", r.Max))
	}
	if r.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("max bytes %d is negative", r.MaxBytes))
	}
	if r.Wait < 0 {
		errs = append(errs, fmt.Errorf("wait %v is negative", r.Wait))
	}
	if err := errors.Join(errs...); err != nil {
		return r, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	if r.Max == 0 {
		r.Max = DefaultMax
	}
	if r.MaxBytes == 0 {
		r.MaxBytes = DefaultMaxBytes
	}
	return r, nil
}
