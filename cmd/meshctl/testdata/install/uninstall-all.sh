# meshctl uninstall: the steps, not run. Run them yourself, or pass --yes to let meshctl run them.

# 1. the management plane's Helm release
helm uninstall meshplane --namespace meshplane --keep-history --kube-context kind-mgmt

# 2. the namespace meshplane (with its Secrets, the registration CA included)
kubectl --context kind-mgmt delete namespace meshplane --ignore-not-found

# 3. Meshplane's CRDs: this deletes every Meshplane resource in the cluster
kubectl --context kind-mgmt delete -f deploy/crds --ignore-not-found
