package cursor

import (
	"errors"
	"testing"
)

func TestParseRoundTrip(t *testing.T) {
	for _, s := range []string{"0-0", "2-1041", "2147483647-9223372036854775807"} {
		c, err := Parse(s)
		if err != nil {
			t.Fatalf("Parse(%q): %v", s, err)
		}
		if c.String() != s {
			t.Fatalf("Parse(%q).String() = %q", s, c.String())
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, s := range []string{"", "-", "1-", "-1", "1--1", "a-1", "1-b", "+1-2", " 1-2", "1-2 ", "2147483648-0", "0-9223372036854775808", "1-2-3"} {
		if _, err := Parse(s); !errors.Is(err, ErrMalformed) {
			t.Fatalf("Parse(%q) error = %v, want ErrMalformed", s, err)
		}
	}
}
