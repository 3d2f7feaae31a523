/**
 * Machine login against an STS that checks signatures (the `moto-sts` peer: moto with
 * authentication on, as AWS). What the service cannot check itself, STS must: a request
 * whose signed server-id header was changed after signing (a signature made for another
 * service, edited to name this one), or whose session token was swapped, is refused by STS
 * and answered 401; the unchanged request logs in.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { after, before, test } from "node:test";
import { generateX25519Identity, identityToRecipient } from "age-encryption";
import { MemoryStore } from "../../providers/stores/memory.ts";
import { parseMachineAuth } from "../../src/config/machine-auth.ts";
import { SCOPES } from "../../src/config/service-config.ts";
import { parseSopsConfig } from "../../src/config/sops-config.ts";
import { awsIamProvider } from "../../src/fetcher/identity/aws-iam.ts";
import { SERVER_ID_HEADER } from "../../src/machine/identity-login.ts";
import { buildApp } from "../../src/service/app.ts";
import { assumeRole, checkingMoto, createRole, MOTO_ACCOUNT, MOTO_REGION } from "../helpers/moto-iam.ts";
import { uniqueName } from "../helpers/peers.ts";
import { appConfig } from "./app-config.ts";

const AUDIENCE = "https://bootseal.signed.test";
const ADMIN = "controller-admin-token-0123456789abcdefghijkl";
const sha = (s: string) => createHash("sha256").update(s).digest("hex");

let app: ReturnType<typeof buildApp>;
let creds: Awaited<ReturnType<typeof assumeRole>>;
let endpoint: string;

before(async () => {
  const moto = checkingMoto();
  endpoint = moto.endpoint;
  const role = uniqueName("signed-role");
  creds = await assumeRole(await createRole(role, moto), "boot", moto);
  app = buildApp({
    logger: false,
    store: new MemoryStore(),
    config: appConfig({
      creationRules: parseSopsConfig(
        `creation_rules:\n  - age: ${await identityToRecipient(await generateX25519Identity())}\n`,
        "t",
      ),
      controllers: [{ name: "admin", tokenSha256: sha(ADMIN), scopes: [...SCOPES] }],
      machineAuth: parseMachineAuth(
        {
          audience: AUDIENCE,
          tokenTtl: "1h",
          aws: { stsEndpoint: endpoint, region: MOTO_REGION },
          bindings: [
            {
              method: "aws-iam",
              match: { arn: `arn:aws:iam::${MOTO_ACCOUNT}:role/${role}` },
              machines: "prod/*",
            },
          ],
        },
        undefined,
      ),
    }),
  });
  const put = await app.inject({
    method: "PUT",
    url: "/v1/machines/prod/signed-1/config",
    headers: { authorization: `Bearer ${ADMIN}`, "content-type": "text/plain" },
    payload: "signed secret\n",
  });
  assert.equal(put.statusCode, 201, put.body);
});

after(async () => {
  await app?.close();
});

async function credential(audience: string): Promise<string> {
  return awsIamProvider({ region: MOTO_REGION, endpoint, credentials: creds }).credential({
    audience,
    env: {},
  });
}

function edit(cred: string, change: (headers: Record<string, string>) => void): string {
  const req = JSON.parse(Buffer.from(cred, "base64").toString("utf8"));
  change(req.headers);
  return Buffer.from(JSON.stringify(req)).toString("base64");
}

const login = (credential: string) =>
  app.inject({
    method: "POST",
    url: "/v1/machines/prod/signed-1/login",
    payload: { method: "aws-iam", credential },
  });

test("the unchanged signed request logs in (STS verified the signature)", async () => {
  const res = await login(await credential(AUDIENCE));
  assert.equal(res.statusCode, 200, res.body);
  assert.match((res.json() as { token: string }).token, /^bst\.prod\.signed-1\./);
});

test("a signature made for another server, its server-id header edited to this one: STS refuses, 401", async () => {
  const cred = edit(await credential("https://another-bootseal.test"), (h) => {
    h[SERVER_ID_HEADER] = AUDIENCE;
  });
  const res = await login(cred);
  assert.equal(res.statusCode, 401, res.body);
  assert.match(res.json().message, /AWS STS refused the signed request \(HTTP 403 SignatureDoesNotMatch\)/);
});

test("a swapped session token: STS refuses, 401", async () => {
  const cred = edit(await credential(AUDIENCE), (h) => {
    h["x-amz-security-token"] = `${h["x-amz-security-token"]}x`;
  });
  const res = await login(cred);
  assert.equal(res.statusCode, 401, res.body);
  assert.match(res.json().message, /AWS STS refused/);
});
