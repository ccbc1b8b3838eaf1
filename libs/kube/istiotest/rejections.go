package istiotest

import (
	"regexp"
	"strings"
)

// An istiod log line: an RFC 3339 time, a level, an optional scope
// (ads, model, authorization, klog, ...) and the message, separated by
// tabs. Lines in other shapes (the flags and mesh config dumped as YAML at
// start, other libraries' own log lines) are not istiod's verdict on
// config, and are not looked at.
var istiodLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT[0-9:.]+Z\t(debug|info|warn|error|fatal)\t(.*)$`)

// rejectWords are what istiod says when it rejects, drops or ignores
// config, at any level: "HTTPMatchRequests conflict" (a delegate
// VirtualService), "ignored authorization policy", "skipping server on
// gateway ...: conflict with existing server" (info), "trafficextension
// ... discarded", "invalid mesh config, ignoring", "duplicate host names",
// "... skipping sidecar port ... as it conflicts"; and, from client-go's
// informers, an object that does not decode ("cannot unmarshal", "unknown
// field"), which stops istiod from reading its whole kind. "ACK ERROR" is
// a proxy refusing what istiod sent (a NACK).
var rejectWords = regexp.MustCompile(`(?i)\b(invalid|reject(s|ed|ing)?|conflict(s|ed|ing)?|ignor(e|es|ed|ing)|discard(s|ed|ing)?|skip(s|ped|ping)?|duplicate[sd]?|cannot unmarshal|unknown field|failed to convert|ACK ERROR)\b`)

// benign are messages with those words that say nothing about config,
// each seen in real istiod logs of the harness.
var benign = []*regexp.Regexp{
	// istiod's CRD watcher lists every CRD of the cluster, Meshplane's
	// own among them; its "ignore list" is of CRDs it need not watch.
	regexp.MustCompile(`^CRD \S+ is not at ignore list, adding to CRD watcher$`),
	// The harness runs no sidecar injector: no injection template.
	regexp.MustCompile(`^Skipping sidecar injector, template not found$`),
}

// Rejections returns the lines of an istiod log in which istiod rejects,
// drops or ignores config, or a proxy refuses it.
func Rejections(log string) []string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		m := istiodLine.FindStringSubmatch(line)
		if m == nil || !rejectWords.MatchString(m[2]) || isBenign(m[2]) {
			continue
		}
		out = append(out, line)
	}
	return out
}

func isBenign(rest string) bool {
	// The message follows the scope, when there is one.
	msgs := []string{rest}
	if _, msg, ok := strings.Cut(rest, "\t"); ok {
		msgs = append(msgs, msg)
	}
	for _, b := range benign {
		for _, m := range msgs {
			if b.MatchString(m) {
				return true
			}
		}
	}
	return false
}

// Rejections returns the lines of istiod's log so far in which it
// rejects, drops or ignores config (see the package function).
func (id *Istiod) Rejections() []string { return Rejections(id.Log()) }
