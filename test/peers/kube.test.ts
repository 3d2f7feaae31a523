/**
 * Smoke test of the kube-apiserver peer through @kubernetes/client-node (the client the
 * service's TokenReview uses): the pinned version answers, RBAC is on (an anonymous caller
 * is refused), and the admin token can create and read a Secret.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { CoreV1Api, KubeConfig, VersionApi } from "@kubernetes/client-node";
import { peer, uniqueName } from "../helpers/peers.ts";

function client(token: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: "peer",
        server: peer("KUBE_SERVER"),
        caData: readFileSync(peer("KUBE_CA_FILE")).toString("base64"),
      },
    ],
    users: [token ? { name: "u", token } : { name: "u" }],
    contexts: [{ name: "peer", cluster: "peer", user: "u" }],
    currentContext: "peer",
  });
  return kc;
}

test("kube-apiserver: v1.34.4 answers, RBAC refuses anonymous callers, the admin token writes", async () => {
  const admin = client(peer("KUBE_ADMIN_TOKEN"));
  const version = await admin.makeApiClient(VersionApi).getCode();
  assert.equal(version.gitVersion, "v1.34.4");
  const core = admin.makeApiClient(CoreV1Api);
  await assert.rejects(
    client(undefined).makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: "default" }),
    {
      code: 403,
    },
  );
  const name = uniqueName("smoke");
  await core.createNamespacedSecret({
    namespace: "default",
    body: { metadata: { name }, stringData: { k: "v" } },
  });
  const read = await core.readNamespacedSecret({ namespace: "default", name });
  assert.equal(Buffer.from(read.data?.k ?? "", "base64").toString(), "v");
  await core.deleteNamespacedSecret({ namespace: "default", name });
});
