/**
 * Kubernetes ServiceAccount tokens as controller credentials, against the real kube-apiserver
 * peer (scripts/peers/kube.sh): the test creates a namespace, a reviewer ServiceAccount bound
 * to system:auth-delegator, and controller ServiceAccounts, requests their tokens through the
 * TokenRequest API, and sends them to the app (buildApp + inject), which reviews them with a
 * TokenReview through a TCP proxy the test can take down.
 */
import assert from "node:assert/strict";
import { createPrivateKey } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { CoreV1Api, KubeConfig, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { SignJWT } from "jose";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { validateServiceConfig } from "../../src/config/service-config.ts";
import { buildApp } from "../../src/service/app.ts";
import { peer, uniqueName } from "../helpers/peers.ts";
import { type TcpProxy, tcpProxy } from "../helpers/tcp-proxy.ts";

const AUDIENCE = "bootseal-test";
const ns = uniqueName("bootseal");
let dir: string;
let proxy: TcpProxy;
let core: CoreV1Api;
let rbac: RbacAuthorizationV1Api;
let app: ReturnType<typeof buildApp>;
const tokens: Record<string, string> = {};
let deployerUid = "";

async function serviceAccountToken(name: string, audiences: string[]): Promise<string> {
  const answer = await core.createNamespacedServiceAccountToken({
    name,
    namespace: ns,
    body: { spec: { audiences, expirationSeconds: 3600 } },
  });
  return answer.status?.token as string;
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "bootseal-k8s-"));
  const kc = new KubeConfig();
  const ca = readFileSync(peer("KUBE_CA_FILE"));
  kc.loadFromOptions({
    clusters: [{ name: "peer", server: peer("KUBE_SERVER"), caData: ca.toString("base64") }],
    users: [{ name: "admin", token: peer("KUBE_ADMIN_TOKEN") }],
    contexts: [{ name: "peer", cluster: "peer", user: "admin" }],
    currentContext: "peer",
  });
  core = kc.makeApiClient(CoreV1Api);
  rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await core.createNamespace({ body: { metadata: { name: ns } } });
  for (const name of ["reviewer", "deployer", "other"]) {
    const sa = await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name } } });
    if (name === "deployer") deployerUid = sa.metadata?.uid as string;
  }
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: `${ns}-reviewer` },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name: "system:auth-delegator" },
      subjects: [{ kind: "ServiceAccount", name: "reviewer", namespace: ns }],
    },
  });
  tokens.reviewer = await serviceAccountToken("reviewer", [peer("KUBE_ISSUER")]);
  tokens.deployer = await serviceAccountToken("deployer", [AUDIENCE]);
  tokens.other = await serviceAccountToken("other", [AUDIENCE]);
  tokens.wrongAudience = await serviceAccountToken("deployer", ["another-service"]);
  writeFileSync(join(dir, "reviewer.token"), tokens.reviewer, { mode: 0o600 });
  proxy = await tcpProxy(new URL(peer("KUBE_SERVER")));
  const recipient = await identityToRecipient(await generateX25519Identity());
  const config = validateServiceConfig({
    store: "file:///unused",
    creation_rules: [{ age: recipient }],
    controllers: [],
    kubernetesBindings: [
      { serviceAccount: `${ns}/deployer`, scopes: ["configs:write", "status:read"], namespaces: ["team-a"] },
      { serviceAccount: `${ns}/deployer`, scopes: ["status:read"], namespaces: ["team-b"] },
      { serviceAccount: "elsewhere/*", scopes: ["admin"] },
    ],
    controllerAuth: {
      kubernetes: {
        server: `https://127.0.0.1:${new URL(proxy.url).port}`,
        caFile: peer("KUBE_CA_FILE"),
        tokenFile: join(dir, "reviewer.token"),
        audiences: [AUDIENCE],
        // Long enough that the cache check below never races the clock on a loaded machine.
        cacheTtl: "5m",
      },
    },
  });
  app = buildApp({ logger: false, store: new MemoryStore(), config });
});

after(async () => {
  await app?.close();
  await proxy?.close();
  await rbac?.deleteClusterRoleBinding({ name: `${ns}-reviewer` }).catch(() => {});
  await core?.deleteNamespace({ name: ns }).catch(() => {});
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const call = (token: string, method: "GET" | "PUT", url: string) =>
  app.inject({
    method,
    url,
    headers: { authorization: `Bearer ${token}`, "content-type": "text/plain" },
    ...(method === "PUT" ? { payload: "secret\n" } : {}),
  });

test("a bound ServiceAccount's token is accepted and gets its bindings' grants, namespace by namespace", async () => {
  const put = await call(tokens.deployer as string, "PUT", "/v1/machines/team-a/m1/config");
  assert.equal(put.statusCode, 201, put.body);
  assert.equal(put.json().bootstrapToken, undefined, "no tokens:mint");
  const refused = await call(tokens.deployer as string, "PUT", "/v1/machines/team-b/m1/config");
  assert.equal(refused.statusCode, 403);
  assert.match(
    refused.json().message,
    new RegExp(`system:serviceaccount:${ns}:deployer lacks the configs:write scope`),
  );
  const list = await call(tokens.deployer as string, "GET", "/v1/machines");
  assert.equal(list.statusCode, 200);
  assert.deepEqual(
    list.json().items.map((i: { namespace: string }) => i.namespace),
    ["team-a"],
  );
  assert.equal((await call(tokens.deployer as string, "GET", "/v1/machines?namespace=prod")).statusCode, 403);
});

test("another ServiceAccount's valid token, with no binding, is 403", async () => {
  const r = await call(tokens.other as string, "GET", "/v1/machines");
  assert.equal(r.statusCode, 403);
  assert.match(r.json().message, new RegExp(`ServiceAccount ${ns}/other has no kubernetesBindings entry`));
});

test("a token bound to another audience is 401", async () => {
  const r = await call(tokens.wrongAudience as string, "GET", "/v1/machines");
  assert.equal(r.statusCode, 401);
  assert.equal(r.json().code, "UNAUTHORIZED");
});

test("garbage and expired tokens are 401; the same claims unexpired pass (so expiry is what fails)", async () => {
  assert.equal((await call("aaaa.bbbb.cccc", "GET", "/v1/machines")).statusCode, 401);
  assert.equal((await call("not-a-jwt-and-not-a-static-token", "GET", "/v1/machines")).statusCode, 401);
  const key = createPrivateKey(readFileSync(peer("KUBE_SA_KEY_FILE")));
  const now = Math.floor(Date.now() / 1000);
  const sign = (iat: number, exp: number) =>
    new SignJWT({
      "kubernetes.io": { namespace: ns, serviceaccount: { name: "deployer", uid: deployerUid } },
    })
      .setProtectedHeader({ alg: "RS256" })
      .setIssuer(peer("KUBE_ISSUER"))
      .setSubject(`system:serviceaccount:${ns}:deployer`)
      .setAudience([AUDIENCE])
      .setIssuedAt(iat)
      .setNotBefore(iat)
      .setExpirationTime(exp)
      .sign(key);
  const fresh = await call(await sign(now - 10, now + 600), "GET", "/v1/machines");
  assert.equal(fresh.statusCode, 200, fresh.body);
  const expired = await call(await sign(now - 7200, now - 3600), "GET", "/v1/machines");
  assert.equal(expired.statusCode, 401);
});

test("the API server unreachable: 503 with Retry-After, never 500; a cached review still serves", async () => {
  // Reviewed (and cached) while the API server is reachable.
  assert.equal((await call(tokens.deployer as string, "GET", "/v1/machines")).statusCode, 200);
  const unseen = await serviceAccountToken("other", [AUDIENCE]); // never reviewed: not cached
  proxy.setDown(true);
  try {
    const r = await call(unseen, "GET", "/v1/machines");
    assert.equal(r.statusCode, 503, r.body);
    assert.equal(r.json().code, "KEY_UNAVAILABLE");
    assert.ok(Number(r.headers["retry-after"]) > 0);
    assert.equal((await call(tokens.deployer as string, "GET", "/v1/machines")).statusCode, 200);
  } finally {
    proxy.setDown(false);
  }
  assert.equal((await call(unseen, "GET", "/v1/machines")).statusCode, 403);
});
