module github.com/meshplane/meshplane/libs/platform

go 1.26.0
