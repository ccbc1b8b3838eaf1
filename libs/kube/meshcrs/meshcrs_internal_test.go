package meshcrs

import "testing"

func TestJSONPathAt(t *testing.T) {
	doc := `{"policy":{"retries":{"attempts":3},"requestTimeout":"9s"},"destinationSelector":[{"a":1},{"kubeServiceRefs":{"services":[{"name":"x"}]}}]}`
	tests := []struct {
		at   string
		want string
	}{
		{`"9s"`, "policy.requestTimeout"},
		{`3}`, "policy.retries.attempts"},
		{`"x"`, "destinationSelector[1].kubeServiceRefs.services[0].name"},
		{`"requestTimeout"`, "policy.requestTimeout"},
	}
	for _, tt := range tests {
		off := int64(indexOf(doc, tt.at))
		if got := jsonPathAt([]byte(doc), off); got != tt.want {
			t.Errorf("path at %s = %q, want %q", tt.at, got, tt.want)
		}
	}
}

func indexOf(s, sub string) int {
	for i := range len(s) - len(sub) + 1 {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}
