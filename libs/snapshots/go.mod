module github.com/meshplane/meshplane/libs/snapshots

go 1.26.0
