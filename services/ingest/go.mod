module github.com/meshplane/meshplane/services/ingest

go 1.26.0
