module github.com/meshplane/meshplane/libs/gen

go 1.26.0
