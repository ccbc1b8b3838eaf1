module github.com/meshplane/meshplane/libs/redistest

go 1.26.0
