module github.com/meshplane/meshplane/cmd/meshplane

go 1.26.0
