/**
 * GET …/userdata is safe: with a derivation key the stub of a published version is the same
 * bytes every time and nothing is written; a republish gives a new one. Without a key GET is
 * 409 MINT_REQUIRED and POST mints. Both need `tokens:mint`. The bootstrap command travels
 * from the publish (header) or a rule to the stub's `--exec`, never into the config.
 */
import assert from "node:assert/strict";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { test } from "node:test";
import { parse as parseYaml } from "yaml";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { SCOPES, type ServiceConfig, validateServiceConfig } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { type AppConfig, buildApp } from "../../src/service/app.ts";
import { deriveToken } from "../../src/service/tokens.ts";
import { appConfig } from "./app-config.ts";

const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const WRITER = "controller-writer-token-0123456789abcdefghij";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");
const RECIPIENT = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p";
const KEY = randomBytes(32);
const LINUX = {
  url: "https://dl.example.com/bootseal-linux-x64",
  sha256: "1a".repeat(32),
  sha512: "3c".repeat(64),
  signatureUrl: "https://dl.example.com/bootseal-linux-x64.sig",
  publicKeyPem:
    "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAm7KJd/5RnzYFvx+tZSDt1WIy8pJsO1tu5QxaNmsYMWc=\n-----END PUBLIC KEY-----",
};

function app(extra: Partial<AppConfig> = {}, derivationKey: Uint8Array | null = KEY) {
  const store = new MemoryStore();
  const bootstrapToken: ServiceConfig["bootstrapToken"] = derivationKey
    ? { ttlMs: 3_600_000, uses: 5, derivationKey }
    : { ttlMs: 3_600_000, uses: 5 };
  const a = buildApp({
    logger: false,
    store,
    config: appConfig({
      creationRules: parseSopsConfig(`creation_rules:\n  - age: ${RECIPIENT}\n`, "t"),
      controllers: [
        { name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] },
        { name: "writer", tokenSha256: sha(WRITER), scopes: ["configs:write", "status:read"] },
      ],
      fetcherArtifact: LINUX,
      publicUrl: "https://bootseal.example.com",
      bootstrapToken,
      ...extra,
    }),
  });
  return { a, store };
}

const auth = (t: string) => ({ authorization: `Bearer ${t}` });

async function publish(
  a: ReturnType<typeof app>["a"],
  machine: string,
  headers: Record<string, string> = {},
) {
  return a.inject({
    method: "PUT",
    url: `/v1/machines/${machine}/config`,
    headers: { ...auth(ADMIN), "content-type": "text/plain", ...headers },
    payload: "#cloud-config\nruncmd: [echo SECRET-CANARY]\n",
  });
}

const userdata = (a: ReturnType<typeof app>["a"], machine: string, method = "GET", token = ADMIN) =>
  a.inject({ method, url: `/v1/machines/${machine}/userdata?format=cloud-init`, headers: auth(token) });

const tokenIn = (body: string) => /bst\.[a-z0-9-]+\.[a-z0-9-]+\.[A-Za-z0-9_-]{43}/.exec(body)?.[0];

/** Every object's key and version: a GET that wrote anything would change this. */
async function snapshot(store: MemoryStore): Promise<string> {
  const out: string[] = [];
  for await (const info of store.list("")) out.push(`${info.key}@${info.etag}`);
  return out.sort().join("\n");
}

test("two GETs give byte-identical stubs, write nothing, and the token is the derived one", async () => {
  const { a, store } = app();
  const put = await publish(a, "prod/w1");
  assert.equal(put.statusCode, 201, put.body);
  const published = (put.json() as { bootstrapToken: string; version: number }).bootstrapToken;
  const before = await snapshot(store);
  const one = await userdata(a, "prod/w1");
  const two = await userdata(a, "prod/w1");
  assert.equal(one.statusCode, 200, one.body);
  assert.equal(one.body, two.body, "byte-identical");
  assert.equal(await snapshot(store), before, "no store write on GET");
  const token = tokenIn(one.body);
  assert.equal(token, published, "the stub carries the token the publish answered");
  // The derivation, recomputed here from its definition (salt from the stored token record).
  const record = JSON.parse(Buffer.from((await store.get("tokens/prod/w1.json"))!.body).toString("utf8")) as {
    salt: string;
    version: number;
  };
  assert.equal(record.version, 1);
  assert.match(record.salt, /^[A-Za-z0-9_-]{22}$/);
  const secret = createHmac("sha256", KEY)
    .update(`bootseal-bootstrap-token\0prod/w1\0${1}\0${record.salt}`)
    .digest("base64url");
  assert.equal(token, `bst.prod.w1.${secret}`);
  assert.equal(deriveToken(KEY, { namespace: "prod", name: "w1" }, 1, record.salt), token);
  // The token works.
  const fetched = await a.inject({ url: "/v1/machines/prod/w1/config", headers: auth(token!) });
  assert.equal(fetched.statusCode, 200);

  // A republish: a new stub, and the old token is out.
  assert.equal((await publish(a, "prod/w1")).statusCode, 200);
  const three = await userdata(a, "prod/w1");
  assert.equal(three.statusCode, 200);
  assert.notEqual(three.body, one.body);
  const newer = tokenIn(three.body)!;
  assert.notEqual(newer, token);
  assert.equal(
    (await a.inject({ url: "/v1/machines/prod/w1/config", headers: auth(token!) })).statusCode,
    401,
  );
  assert.equal(
    (await a.inject({ url: "/v1/machines/prod/w1/config", headers: auth(newer) })).statusCode,
    200,
  );
  await a.close();
});

test("no derivation key: GET is 409 MINT_REQUIRED pointing at POST; POST mints; GET after a POST mint is 409", async () => {
  const { a } = app({}, null);
  await publish(a, "prod/w2");
  const get = await userdata(a, "prod/w2");
  assert.equal(get.statusCode, 409, get.body);
  assert.equal((get.json() as { code: string }).code, "MINT_REQUIRED");
  assert.match(get.body, /POST \/v1\/machines\/prod\/w2\/userdata/);
  const post = await userdata(a, "prod/w2", "POST");
  assert.equal(post.statusCode, 200, post.body);
  assert.ok(tokenIn(post.body));
  assert.ok(post.headers["x-bootseal-token-expires-at"]);

  // With a key, a POST mint replaces the derived token: GET can no longer render it.
  const { a: b } = app();
  await publish(b, "prod/w3");
  assert.equal((await userdata(b, "prod/w3")).statusCode, 200);
  const minted = await userdata(b, "prod/w3", "POST");
  assert.equal(minted.statusCode, 200);
  const after = await userdata(b, "prod/w3");
  assert.equal(after.statusCode, 409, after.body);
  assert.match(after.body, /minted by POST/);
  // An unpublished machine: 404 for both.
  assert.equal((await userdata(b, "prod/none")).statusCode, 404);
  assert.equal((await userdata(b, "prod/none", "POST")).statusCode, 404);
  await a.close();
  await b.close();
});

test("user data needs tokens:mint (configs:write alone is 403), for GET and POST", async () => {
  const { a } = app();
  await publish(a, "prod/w4");
  for (const method of ["GET", "POST"]) {
    const res = await userdata(a, "prod/w4", method, WRITER);
    assert.equal(res.statusCode, 403, `${method}: ${res.body}`);
    assert.ok(!tokenIn(res.body));
  }
  assert.ok(SCOPES.includes("tokens:mint"));
  await a.close();
});

function dropinOf(body: string): string | undefined {
  const doc = parseYaml(body) as { write_files: { path: string; content: string }[] };
  return doc.write_files.find((f) => f.path.endsWith("10-bootseal-machine.conf"))?.content;
}

test("the bootstrap command: from the publish header or a rule, to --exec; invalid ones refused before storing", async () => {
  const rules = validateServiceConfig({
    store: "file:///nonexistent",
    creation_rules: [{ age: RECIPIENT }],
    controllers: [{ name: "u", tokenSha256: "0".repeat(64), scopes: ["admin"] }],
    bootstrapCommands: [
      { match: "^prod/gpu-", command: "/opt/gpu/join.sh --fast" },
      { match: "^prod/", command: "kubeadm join --config /run/kubeadm/join.yaml" },
    ],
  }).bootstrapCommands;
  const { a, store } = app({ bootstrapCommands: rules });
  // A rule.
  await publish(a, "prod/gpu-1");
  const gpu = dropinOf((await userdata(a, "prod/gpu-1")).body);
  assert.match(gpu!, /--apply --root \/ --exec "\/opt\/gpu\/join\.sh --fast"\n$/);
  // The header wins over the rules, and is escaped for systemd.
  const cmd = `kubeadm join --token "a b" $HOME 50% \\x`;
  assert.equal((await publish(a, "prod/w5", { "x-bootseal-bootstrap-command": cmd })).statusCode, 201);
  const own = dropinOf((await userdata(a, "prod/w5")).body);
  assert.ok(own!.includes(`--exec "kubeadm join --token \\"a b\\" $$HOME 50%% \\\\x"\n`), own);
  // Stored with the token, not in the config.
  const config = Buffer.from((await store.get("configs/prod/w5"))?.body ?? new Uint8Array()).toString("utf8");
  assert.ok(!config.includes("kubeadm"), "the command is not in the config");
  // POST keeps the published command.
  assert.ok(dropinOf((await userdata(a, "prod/w5", "POST")).body)!.includes("kubeadm join --token"));
  // A machine no rule matches and no header: no drop-in.
  const { a: b } = app({ bootstrapCommands: rules });
  await publish(b, "dev/w6");
  assert.equal(dropinOf((await userdata(b, "dev/w6")).body), undefined);
  // Refused before anything is stored: too long, a control character.
  for (const bad of ["x".repeat(4097), "echo a\tb"]) {
    const res = await publish(b, "dev/w7", { "x-bootseal-bootstrap-command": bad });
    assert.equal(res.statusCode, 400, res.body);
    assert.equal((res.json() as { code: string }).code, "BAD_INPUT");
    assert.match(res.body, /x-bootseal-bootstrap-command/);
  }
  assert.equal(await store.head("configs/dev/w7"), null, "nothing stored");
  await a.close();
  await b.close();
});

test("a machine with a cloud-identity binding: GET and POST give a stub with its login flags and no secret", async () => {
  const { machineAuth } = validateServiceConfig({
    store: "file:///nonexistent",
    creation_rules: [{ age: RECIPIENT }],
    controllers: [{ name: "unused", tokenSha256: "0".repeat(64), scopes: ["admin"] }],
    publicUrl: "https://bootseal.example.com",
    machineAuth: {
      bindings: [
        { method: "aws-iam", match: { arn: "arn:aws:iam::111122223333:role/worker" }, machines: "prod/*" },
      ],
    },
  });
  const { a, store } = app({ machineAuth });
  assert.equal((await publish(a, "prod/w1")).statusCode, 201);
  assert.equal((await publish(a, "staging/w1")).statusCode, 201);
  const before = await snapshot(store);
  for (const method of ["GET", "POST"]) {
    const stub = await userdata(a, "prod/w1", method);
    assert.equal(stub.statusCode, 200, stub.body);
    assert.equal(tokenIn(stub.body), undefined, `${method}: no bootstrap token`);
    assert.doesNotMatch(stub.body, /path: \/etc\/bootseal\/token\n/, `${method}: no token file written`);
    assert.match(
      stub.body,
      /--auth aws-iam --server-id https:\/\/bootseal\.example\.com --aws-sts-region us-east-1 --aws-sts-endpoint https:\/\/sts\.us-east-1\.amazonaws\.com/,
    );
  }
  assert.equal(await snapshot(store), before, "nothing minted for the bound machine");
  // A machine outside the binding still gets its token.
  const other = await userdata(a, "staging/w1");
  assert.equal(other.statusCode, 200, other.body);
  assert.ok(tokenIn(other.body));
});
