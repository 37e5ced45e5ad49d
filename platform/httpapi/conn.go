package httpapi

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"
)

// ErrorFormatListener wraps ln so that the answers net/http writes by
// itself, before any handler runs, also come in the error format
// ({"error","code"} with X-Request-Id) instead of text/plain:
//
//	400 invalid_request             a request line or header net/http cannot parse
//	                                (bad method, URI, header name or value, missing or
//	                                repeated Host, bad Content-Length)
//	417 expectation_failed          an Expect header other than 100-continue
//	431 request_headers_too_large   headers over http.Server.MaxHeaderBytes (1 MiB)
//	501 not_implemented             a Transfer-Encoding other than chunked
//	505 http_version_not_supported  not HTTP/1.x (HTTP/2 needs TLS here)
//
// net/http writes these with one Write on the connection (its own
// text/plain header block, Connection: close and no Date header, which no
// handler answer matches), so the wrapped connection recognizes exactly
// those writes and sends the same status in the error format; every other
// write passes through untouched. Nothing can be answered when the client
// closes or times out before a request is read (net/http hangs up), and a
// client still sending an oversized header block may not read the 431.
func ErrorFormatListener(ln net.Listener, log *slog.Logger) net.Listener {
	return &errorFormatListener{Listener: ln, log: log}
}

type errorFormatListener struct {
	net.Listener
	log *slog.Logger
}

func (l *errorFormatListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &errorFormatConn{Conn: c, log: l.log}, nil
}

type errorFormatConn struct {
	net.Conn
	log *slog.Logger
}

// CloseWrite keeps the half-close net/http uses after a 431.
func (c *errorFormatConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// net/http's plain answers: status line, then exactly this header block.
const plainHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

var (
	httpPrefix   = []byte("HTTP/1.1 ")
	expectFailed = []byte("HTTP/1.1 417 Expectation Failed\r\n")
)

func (c *errorFormatConn) Write(p []byte) (int, error) {
	if len(p) < len(httpPrefix)+3 || !bytes.HasPrefix(p, httpPrefix) || p[9] != '4' && p[9] != '5' {
		return c.Conn.Write(p)
	}
	out, ok := c.rewrite(p)
	if !ok {
		return c.Conn.Write(p)
	}
	if _, err := c.Conn.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// rewrite returns the error-format answer for one of net/http's own
// answers, or false for anything else.
func (c *errorFormatConn) rewrite(p []byte) ([]byte, bool) {
	status, err := strconv.Atoi(string(p[9:12]))
	if err != nil || len(p) < 13 || p[12] != ' ' {
		return nil, false
	}
	var code Code
	var msg string
	switch {
	case bytes.HasPrefix(p, expectFailed):
		// sendExpectationFailed: a normal empty answer, but no handler ran.
		if !bytes.Contains(p, []byte("\r\nContent-Length: 0\r\n")) || !bytes.HasSuffix(p, []byte("\r\n\r\n")) {
			return nil, false
		}
		code, msg = CodeExpectationFailed, "Expectation Failed: only \"Expect: 100-continue\" is supported"
	default:
		i := bytes.Index(p, []byte(plainHeaders))
		if i < 0 || bytes.IndexByte(p[:i], '\n') >= 0 {
			return nil, false
		}
		body := string(p[i+len(plainHeaders):])
		switch status {
		case 400:
			code = CodeInvalidRequest
		case 431:
			code = CodeHeadersTooLarge
		case 501:
			code = CodeNotImplemented
		case 505:
			code = CodeHTTPVersion
		default:
			return nil, false
		}
		// "400 Bad Request: missing required Host header" → drop the status.
		if len(body) > 4 && body[:3] == string(p[9:12]) && body[3] == ' ' {
			body = body[4:]
		}
		msg = body + " (the request could not be parsed as HTTP/1.1)"
	}
	var id [12]byte
	_, _ = rand.Read(id[:])
	rid := hex.EncodeToString(id[:])
	js, _ := json.Marshal(errorBody{Error: msg, Code: code.Code})
	out := make([]byte, 0, 160+len(js))
	out = append(out, httpPrefix...)
	out = strconv.AppendInt(out, int64(status), 10)
	out = append(out, ' ')
	out = append(out, http.StatusText(status)...)
	out = append(out, "\r\nContent-Type: application/json; charset=utf-8\r\n"...)
	out = append(out, HeaderRequestID+": "+rid+"\r\nConnection: close\r\nContent-Length: "...)
	out = strconv.AppendInt(out, int64(len(js)), 10)
	out = append(out, "\r\n\r\n"...)
	out = append(out, js...)
	if c.log != nil {
		c.log.Info("malformed request answered before routing", "status", status, "code", code.Code, "request_id", rid, "remote", c.RemoteAddr().String(), "error", msg)
	}
	return out, true
}
