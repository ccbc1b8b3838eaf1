module github.com/meshplane/meshplane/services/distribution

go 1.26.0
