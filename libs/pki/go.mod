module github.com/meshplane/meshplane/libs/pki

go 1.26.0
