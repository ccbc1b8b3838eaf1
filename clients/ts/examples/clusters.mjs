// clusters.mjs: create a cluster and list the clusters of a Meshplane
// installation with the generated TypeScript client, over mTLS with a
// management service certificate (as meshctl presents).
//
//   MESHPLANE_ADDR=127.0.0.1:9901 MESHPLANE_CA_FILE=root.crt \
//   MESHPLANE_CERT_FILE=meshctl.crt MESHPLANE_KEY_FILE=meshctl.key \
//   node examples/clusters.mjs [new-cluster-name]
//
// It prints one JSON object: the token response (when a name is given) and
// the cluster list, in the protobuf JSON mapping.
import { readFileSync } from "node:fs";
import { toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport } from "@connectrpc/connect-node";
import {
  ClusterService,
  ListClustersResponseSchema,
} from "../gen/meshplane/registration/v1/cluster_pb.js";

function env(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`clusters.mjs: set ${name}`);
    process.exit(2);
  }
  return v;
}

const options = {
  baseUrl: `https://${env("MESHPLANE_ADDR")}`,
  httpVersion: "2",
  nodeOptions: {
    ca: readFileSync(env("MESHPLANE_CA_FILE")),
    cert: readFileSync(env("MESHPLANE_CERT_FILE")),
    key: readFileSync(env("MESHPLANE_KEY_FILE")),
  },
};
// The same server speaks Connect, gRPC and gRPC-Web: create with one
// protocol and list with the other, so both are exercised.
const connect = createClient(ClusterService, createConnectTransport(options));
const grpc = createClient(ClusterService, createGrpcTransport(options));

const out = {};
const name = process.argv[2];
if (name) {
  const created = await connect.createCluster({ name, requireApproval: true });
  out.created = { cluster: created.cluster?.name ?? "", tokenIssued: created.token !== "" };
}
const list = await grpc.listClusters({});
out.clusters = toJson(ListClustersResponseSchema, list).clusters ?? [];
console.log(JSON.stringify(out));
