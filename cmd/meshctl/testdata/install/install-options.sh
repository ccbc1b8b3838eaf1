# meshctl install: the steps, not run. Run them yourself, or pass --yes to let meshctl run them.

# 1. Meshplane's CRDs (the charts do not install them)
kubectl --kubeconfig /home/me/.kube/config --context kind-mgmt apply --server-side --field-manager=meshctl -f release/crds

# 2. the management plane (registration, ingest, translation, distribution) in namespace mesh system
helm upgrade --install mp meshplane/meshplane --namespace 'mesh system' --create-namespace --version 0.1.0 -f values-prod.yaml -f more.yaml --set registration.replicas=2 --wait --kubeconfig /home/me/.kube/config --kube-context kind-mgmt
