package httpserver_test

import (
	"strings"
	"testing"

	"github.com/meshplane/meshplane/services/console/internal/adapters/httpserver"
)

var loginSeeds = []struct {
	body, token string
	ok          bool
}{
	{`{"token":"abc"}`, "abc", true},
	{` {"token":"a.b.c"} `, "a.b.c", true},
	{`{"token":""}`, "", false},
	{`{}`, "", false},
	{`{"token":1}`, "", false},
	{`{"token":"a","user":"b"}`, "", false},
	{`{"token":"a"}{"token":"b"}`, "", false},
	{`{"token":"a"} x`, "", false},
	{`["token"]`, "", false},
	{``, "", false},
	{`{"token":"` + strings.Repeat("x", httpserver.MaxLoginBody) + `"}`, "", false},
}

func TestParseLoginBody(t *testing.T) {
	for _, s := range loginSeeds {
		tok, err := httpserver.ParseLoginBody(strings.NewReader(s.body))
		if (err == nil) != s.ok || tok != s.token {
			t.Errorf("ParseLoginBody(%.40q) = %q, %v; want %q, ok=%v", s.body, tok, err, s.token, s.ok)
		}
	}
}

// FuzzParseLoginBody checks that no body panics the parser, that an
// accepted body gave a non-empty token, and that nothing over the limit is
// accepted.
func FuzzParseLoginBody(f *testing.F) {
	for _, s := range loginSeeds {
		f.Add(s.body)
	}
	f.Fuzz(func(t *testing.T, body string) {
		tok, err := httpserver.ParseLoginBody(strings.NewReader(body))
		if err != nil {
			return
		}
		if tok == "" {
			t.Errorf("accepted %q with an empty token", body)
		}
		if len(body) > httpserver.MaxLoginBody {
			t.Errorf("accepted a body of %d bytes", len(body))
		}
	})
}
