package webhookstore

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

// maxErrorText caps an error text kept in a dead letter (last_error), a
// disabled reason or a log line.
const maxErrorText = 300

// RedactError is err's text safe to show and keep: the *url.Error layer
// (which repeats the whole webhook URL, query tokens included) is
// dropped, a DNS error does not name the resolver that answered, any
// URL still present loses its userinfo, query and fragment, and the text
// is capped at 300 bytes.
func RedactError(err error) string {
	if err == nil {
		return ""
	}
	var ue *url.Error
	for errors.As(err, &ue) {
		err = ue.Err
	}
	if err == nil {
		return ""
	}
	msg := err.Error()
	var de *net.DNSError
	if errors.As(err, &de) && de.Server != "" {
		msg = strings.ReplaceAll(msg, " on "+de.Server, "")
		msg = strings.ReplaceAll(msg, de.Server, "[resolver]")
	}
	msg = redactURLs(msg)
	if len(msg) > maxErrorText {
		cut := maxErrorText
		for cut > 0 && msg[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// RedactURL is raw without userinfo, query and fragment.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		if i := strings.IndexAny(raw, "?#"); i >= 0 {
			return raw[:i]
		}
		return raw
	}
	u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
	return u.String()
}

// redactURLs applies RedactURL to every http(s) URL in s.
func redactURLs(s string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, "http://")
		if j := strings.Index(s, "https://"); j >= 0 && (i < 0 || j < i) {
			i = j
		}
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		end := strings.IndexAny(s, " \t\n\"'")
		if end < 0 {
			end = len(s)
		}
		tok := s[:end]
		trail := strings.TrimRight(tok, ":,;)")
		b.WriteString(RedactURL(trail))
		b.WriteString(tok[len(trail):])
		s = s[end:]
	}
}
