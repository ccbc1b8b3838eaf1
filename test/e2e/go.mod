module github.com/meshplane/meshplane/test/e2e

go 1.26.0
