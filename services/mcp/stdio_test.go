package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

func TestMainArgsAndEnv(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	cases := []struct {
		args []string
		env  map[string]string
		code int
		out  string
	}{
		{nil, nil, 2, "MQ_API_KEY is required"},
		{[]string{"--help"}, nil, 0, "MQ_URL"},
		{[]string{"extra"}, map[string]string{"MQ_API_KEY": "k"}, 2, `unexpected argument "extra"`},
		{nil, map[string]string{"MQ_API_KEY": "k", "MQ_URL": "ftp://x"}, 2, "want http(s)://"},
	}
	for _, tc := range cases {
		var out bytes.Buffer
		code := Main(tc.args, env(tc.env), strings.NewReader(""), &out, &out, "t")
		if code != tc.code || !strings.Contains(out.String(), tc.out) {
			t.Errorf("%v %v: exit %d %q, want %d with %q", tc.args, tc.env, code, out.String(), tc.code, tc.out)
		}
	}
}

// Over stdio, an initialize then tools/list gets the nine tools; the
// server ends cleanly when stdin closes.
func TestMainServesStdio(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var errs bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- Main(nil, func(k string) string { return map[string]string{"MQ_API_KEY": "k"}[k] }, inR, outW, &errs, "t")
		outW.Close()
	}()
	send := func(s string) {
		if _, err := io.WriteString(inW, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	var names []string
	for sc.Scan() {
		var msg struct {
			ID     int `json:"id"`
			Result struct {
				Tools []struct{ Name string } `json:"tools"`
			} `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &msg); err != nil {
			t.Fatalf("%q: %v", sc.Text(), err)
		}
		if msg.ID == 1 {
			send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
		}
		if msg.ID == 2 {
			for _, tl := range msg.Result.Tools {
				names = append(names, tl.Name)
			}
			inW.Close()
		}
	}
	if len(names) != 9 {
		t.Fatalf("tools/list over stdio: %v", names)
	}
	if c := <-code; c != 0 {
		t.Fatalf("exit %d after stdin closed: %s", c, errs.String())
	}
}
