module github.com/meshplane/meshplane/services/registration

go 1.26.0
