# meshctl install: the steps, not run. Run them yourself, or pass --yes to let meshctl run them.

# 1. Meshplane's CRDs (the charts do not install them)
kubectl apply --server-side --field-manager=meshctl -f deploy/crds

# 2. the umbrella chart's dependencies (the service charts, by local path)
helm dependency build deploy/charts/meshplane

# 3. the management plane (registration, ingest, translation, distribution) in namespace meshplane
helm upgrade --install meshplane deploy/charts/meshplane --namespace meshplane --create-namespace
