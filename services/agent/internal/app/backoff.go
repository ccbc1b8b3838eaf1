package app

import "github.com/meshplane/meshplane/libs/snapshots"

// Backoff is the jittered exponential backoff of every retry loop of the
// agent: the one the stores use (snapshots.Backoff).
type Backoff = snapshots.Backoff
