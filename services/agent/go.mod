module github.com/meshplane/meshplane/services/agent

go 1.26.0
