module github.com/meshplane/meshplane/services/translation

go 1.26.0
