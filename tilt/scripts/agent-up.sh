#!/usr/bin/env bash
# Registers one workload cluster with the dev management plane and installs
# (or upgrades) its agent there. Run by the Tiltfile's agent-<cluster>
# resources; by hand:
#
#   tilt/scripts/agent-up.sh east kind-meshplane-east kind-meshplane-mgmt
#
# Tilt drives one kube context (the management cluster), so the workload
# clusters are deployed here with helm --kube-context:
#   1. push the host-built agent (tilt/.bin/agent) as an image to the local
#      registry that every kind cluster pulls from;
#   2. `meshctl cluster register` against the port-forwarded registration
#      service (localhost:9901), which prints the agent's helm values with a
#      fresh single-use bootstrap token;
#   3. point the agent at the management node's IP and the NodePorts of
#      registration, ingest and distribution, verifying the certificates
#      with the shared dev name (devpki -server-name);
#   4. helm upgrade --install deploy/charts/agent with tilt/values/agent.yaml.
set -euo pipefail
cluster=${1:?usage: agent-up.sh CLUSTER WORKLOAD_CONTEXT MGMT_CONTEXT}
context=${2:?workload kube context}
mgmt=${3:?management kube context}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
ns=meshplane
registry=${MESHPLANE_DEV_REGISTRY:-localhost:5005}
server_name=${MESHPLANE_DEV_SERVER_NAME:-management.meshplane.internal}
pki=tilt/.pki
gen=$pki/agents
mkdir -p "$gen"

# 1. The image: the same Dockerfile as Tilt's, tagged by the binary's hash so
# that helm rolls the Deployment exactly when the code changed.
tag=dev-$(sha256sum tilt/.bin/agent | cut -c1-12)
image=$registry/meshplane-dev/agent
docker build -q -f tilt/Dockerfile.tilt --build-arg BINARY=agent -t "$image:$tag" tilt/.bin >/dev/null
docker push -q "$image:$tag" >/dev/null

# 2. Register. Each run makes a new token: the agent keeps its key in an
# emptyDir, so a new pod has to register again.
tilt/.bin/meshctl cluster register --cluster "$cluster" --addr localhost:9901 \
  --pki-dir "$pki" --namespace "$ns" -o json >"$gen/$cluster.json"
jq '.helmValues' "$gen/$cluster.json" >"$gen/$cluster-values.json"

# 3. Where the management plane is, seen from another kind cluster.
node_ip=$(kubectl --context "$mgmt" get nodes -o jsonpath='{.items[0].status.addresses[?(@.type=="InternalIP")].address}')
nodeport() {
  kubectl --context "$mgmt" -n "$ns" get svc "meshplane-$1" \
    -o jsonpath='{.spec.ports[?(@.name=="https")].nodePort}'
}
reg=$node_ip:$(nodeport registration)
ing=$node_ip:$(nodeport ingest)
dist=$node_ip:$(nodeport distribution)

# 4. Install. The CRDs first: the agent reads the resources users apply.
kubectl --context "$context" apply --server-side -f deploy/crds/ >/dev/null
helm upgrade --install meshplane-agent deploy/charts/agent \
  --kube-context "$context" --namespace "$ns" --create-namespace \
  -f tilt/values/agent.yaml -f "$gen/$cluster-values.json" \
  --set-string cluster="$cluster" \
  --set-string image.repository="$image" --set-string image.tag="$tag" \
  --set-string relayAddr="$reg" --set-string registrationAddr="$reg" \
  --set-string ingestAddr="$ing" --set-string distributionAddr="$dist" \
  --set-string serverName="$server_name" \
  --set-string caBundleSecret.name= \
  --wait --timeout 3m
echo "agent for cluster $cluster installed in $context (image $image:$tag)"
