module github.com/meshplane/meshplane/libs/pki

go 1.26.0

require go.step.sm/crypto v0.91.1

require (
	dario.cat/mergo v1.0.1 // indirect
	filippo.io/edwards25519 v1.2.0 // indirect
	github.com/Masterminds/goutils v1.1.1 // indirect
	github.com/Masterminds/semver/v3 v3.5.0 // indirect
	github.com/Masterminds/sprig/v3 v3.3.0 // indirect
	github.com/go-jose/go-jose/v3 v3.0.5 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/huandu/xstrings v1.5.0 // indirect
	github.com/mitchellh/copystructure v1.2.0 // indirect
	github.com/mitchellh/reflectwalk v1.0.2 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/shopspring/decimal v1.4.0 // indirect
	github.com/spf13/cast v1.7.0 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/net v0.61.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

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
