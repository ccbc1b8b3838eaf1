module github.com/meshplane/meshplane/libs/pki

go 1.26.0

replace github.com/meshplane/meshplane/libs/gen => ../gen

replace github.com/meshplane/meshplane/libs/platform => ../platform

replace github.com/meshplane/meshplane/libs/kube => ../kube

replace github.com/meshplane/meshplane/libs/redistest => ../redistest

replace github.com/meshplane/meshplane/libs/snapshots => ../snapshots

replace github.com/meshplane/meshplane/services/registration => ../../services/registration

replace github.com/meshplane/meshplane/services/ingest => ../../services/ingest

replace github.com/meshplane/meshplane/services/translation => ../../services/translation

replace github.com/meshplane/meshplane/services/distribution => ../../services/distribution

replace github.com/meshplane/meshplane/services/agent => ../../services/agent

replace github.com/meshplane/meshplane/cmd/meshctl => ../../cmd/meshctl

replace github.com/meshplane/meshplane/cmd/meshplane => ../../cmd/meshplane

replace github.com/meshplane/meshplane/test/e2e => ../../test/e2e
