# meshctl install: the steps, not run. Run them yourself, or pass --yes to let meshctl run them.

# 1. the umbrella chart's dependencies (the service charts, by local path)
/opt/helm/bin/helm dependency build deploy/charts/meshplane

# 2. the management plane (registration, ingest, translation, distribution) in namespace meshplane
/opt/helm/bin/helm upgrade --install meshplane deploy/charts/meshplane --namespace meshplane --create-namespace
