package kubetest

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// auditPolicy records every write at Metadata level (who, with which
// user agent, what, when, and the answer) and nothing else; one line per
// request, when its response is complete.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// AuditEvent is one write request as the API server's audit log records
// it.
type AuditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	// RequestReceived is when the API server received the request;
	// Completed when it sent the whole response.
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
	Completed       time.Time `json:"stageTimestamp"`
}

// auditArgs writes the audit policy and returns the API server flags
// that log to c.auditLog.
func (c *Cluster) auditArgs() ([]string, error) {
	policy := filepath.Join(c.stateDir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, err
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + c.auditLog,
		"--audit-log-format=json",
		// Blocking: a request is answered only once its line is
		// written, so the log never misses a write that happened.
		"--audit-log-mode=blocking",
	}, nil
}

// AuditLog returns the path of the audit log (Options.Audit), kept with
// the other logs.
func (c *Cluster) AuditLog() string { return c.auditLog }

// AuditEvents reads the audit log: every write request answered so far,
// in the order the API server completed them. It fails when the cluster
// was started without Options.Audit.
func (c *Cluster) AuditEvents() ([]AuditEvent, error) {
	if c.auditLog == "" {
		return nil, errors.New("kubetest: cluster " + c.Name + " was started without Options.Audit")
	}
	f, err := os.Open(c.auditLog)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil // nothing written yet
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		var e AuditEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// The API server may be writing the last line now.
			if !sc.Scan() {
				break
			}
			return nil, fmt.Errorf("kubetest: %s line %d: %w", c.auditLog, n, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}
