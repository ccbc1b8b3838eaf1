# meshctl uninstall: the steps, not run. Run them yourself, or pass --yes to let meshctl run them.

# 1. the management plane's Helm release
helm uninstall meshplane --namespace meshplane
