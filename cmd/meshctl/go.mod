module github.com/meshplane/meshplane/cmd/meshctl

go 1.26.0
