package pollgroup

import "errors"

var (
	// ErrUnknownMember is returned by Commit when no member with the key is
	// held by this process (it never polled here, expired after
	// Config.IdleTimeout, its topic was closed, or the process restarted),
	// and by a Poll whose member was closed under it by CloseTopic. The
	// member's unacknowledged records will be delivered again; the HTTP
	// layer answers 404 and the client polls again.
	ErrUnknownMember = errors.New("pollgroup: unknown member")

	// ErrTooManyMembers is returned by Poll when creating the member would
	// exceed Config.MaxMembers or Config.MaxMembersPerOwner. Retry later or
	// on another instance (the gateway answers 429 too_many_consumers).
	ErrTooManyMembers = errors.New("pollgroup: too many members")

	// ErrClosed is returned by every call after Close has begun.
	ErrClosed = errors.New("pollgroup: manager closed")

	// ErrInvalidRequest is wrapped by Poll and Commit for an empty group or
	// topic or a negative limit; the text says which (400).
	ErrInvalidRequest = errors.New("pollgroup: invalid request")
)
