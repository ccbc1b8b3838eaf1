package app

import (
	"context"
	"fmt"

	snapshotv1 "github.com/meshplane/meshplane/libs/gen/meshplane/snapshot/v1"
)

// An input version reaches translation twice: in ingest's Notify, and in
// the input store's change notice, which ingest triggers by storing first.
// Decoding it is the costly part (2 MB of policies at the reference
// estate), so each path claims the version before it decodes, and the one
// that comes second waits for the first instead of decoding it again.

// InputClaim is the right to decode one version of a cluster's input and
// submit it. Exactly one of Submit and Abandon ends it; Abandon after
// Submit does nothing, so a caller may defer it.
type InputClaim struct {
	t       *Translator
	cluster string
	d       *decoding // nil when the claim is not shared (no version)
}

// inputVersion names one version of a cluster's input.
type inputVersion struct{ cluster, version string }

// decoding is a version of a cluster's input being decoded. done is closed
// when its claim ends; submitted then says whether the input was
// submitted. Guarded by Translator.mu.
type decoding struct {
	key       inputVersion
	done      chan struct{}
	submitted bool
	ended     bool
}

// ClaimInput claims version of cluster's input for decoding. It returns a
// nil claim when there is nothing to decode: the translator holds that
// version, or another caller has just decoded and submitted it, which
// counts as the cluster having reported (as Submit would). When another
// caller is decoding it, ClaimInput waits for that one; if it fails, the
// claim passes to this caller. An empty version cannot be matched, so it
// is always claimed, and not shared.
func (t *Translator) ClaimInput(ctx context.Context, cluster, version string) (*InputClaim, error) {
	if cluster == "" || version == "" {
		return &InputClaim{t: t, cluster: cluster}, nil
	}
	for {
		t.mu.Lock()
		if t.inputs[cluster].GetVersion() == version {
			t.reportedLocked(cluster)
			t.mu.Unlock()
			return nil, nil
		}
		key := inputVersion{cluster, version}
		d := t.decoding[key]
		if d == nil {
			d = &decoding{key: key, done: make(chan struct{})}
			t.decoding[key] = d
			t.mu.Unlock()
			return &InputClaim{t: t, cluster: cluster, d: d}, nil
		}
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for the decoding of cluster %q input %s: %w", cluster, version, ctx.Err())
		case <-d.done:
		}
		t.mu.Lock()
		submitted := d.submitted
		if submitted {
			t.reportedLocked(cluster)
		}
		t.mu.Unlock()
		if submitted {
			return nil, nil
		}
		// The other caller failed: claim it again (or find it held).
	}
}

// Submit submits the decoded input, as Translator.Submit does, and ends
// the claim.
func (c *InputClaim) Submit(in *snapshotv1.InputSnapshot) error {
	err := c.t.Submit(c.cluster, in)
	c.end(err == nil)
	return err
}

// SubmitEncoded is Submit of in, decoded from data: translation keeps the
// encodings of its policies to tell which are unchanged in the next input
// without encoding them. data may be nil.
func (c *InputClaim) SubmitEncoded(in *snapshotv1.InputSnapshot, data []byte) error {
	err := c.t.submit(c.cluster, in, data)
	c.end(err == nil)
	return err
}

// Abandon ends the claim without an input: a caller waiting for this
// version decodes it itself.
func (c *InputClaim) Abandon() { c.end(false) }

func (c *InputClaim) end(submitted bool) {
	if c.d == nil {
		return
	}
	c.t.mu.Lock()
	defer c.t.mu.Unlock()
	if c.d.ended {
		return
	}
	c.d.ended, c.d.submitted = true, submitted
	delete(c.t.decoding, c.d.key)
	close(c.d.done)
}
