module github.com/meshplane/meshplane/libs/kube

go 1.26.0
