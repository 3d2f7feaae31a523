/**
 * The parts of machine login that need no STS: the `machineAuth` configuration, binding
 * matching (globs, role ARNs matching their sessions, instance ids), machineAuthFor, the
 * local checks of a signed request, and the strict reading of STS's XML answer.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseMachineAuth } from "../../src/config/machine-auth.ts";
import { validateServiceConfig } from "../../src/config/service-config.ts";
import { BootsealError } from "../../src/errors.ts";
import { SERVER_ID_HEADER } from "../../src/machine/identity-login.ts";
import {
  awsAttributes,
  checkSignedRequest,
  decodeSignedRequest,
} from "../../src/service/identity/aws-iam.ts";
import { parseCallerIdentity } from "../../src/service/identity/aws-sts.ts";
import { allowedBinding, globMatches, machineAuthFor } from "../../src/service/identity/bindings.ts";
import { loginFlags } from "../../src/service/identity/index.ts";
import type { ProvenIdentity } from "../../src/service/identity/verifier.ts";

const MINIMAL = {
  store: "file:///nonexistent",
  creation_rules: [{ age: "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p" }],
  controllers: [{ name: "unused", tokenSha256: "0".repeat(64), scopes: ["admin"] }],
};

function usage(fn: () => unknown, pattern: RegExp): void {
  assert.throws(
    fn,
    (err: unknown) => err instanceof BootsealError && err.code === "USAGE" && pattern.test(err.message),
  );
}

function aws(arn: string): ProvenIdentity {
  return {
    method: "aws-iam",
    principal: arn,
    attributes: awsAttributes({ arn, account: "111122223333", userId: "AROAEXAMPLE:session" }),
  };
}

test("machineAuth defaults: 1h tokens, us-east-1 STS, no bindings, audience from publicUrl's origin", () => {
  const c = validateServiceConfig({ ...MINIMAL, publicUrl: "https://boot.example.com/prefix" });
  assert.equal(c.machineAuth.tokenTtlMs, 3_600_000);
  assert.equal(c.machineAuth.aws.region, "us-east-1");
  assert.equal(c.machineAuth.aws.stsEndpoint, "https://sts.us-east-1.amazonaws.com");
  assert.deepEqual(c.machineAuth.bindings, []);
  assert.equal(c.machineAuth.audience, "https://boot.example.com");
  const eu = validateServiceConfig({ ...MINIMAL, machineAuth: { aws: { region: "eu-west-1" } } });
  assert.equal(eu.machineAuth.aws.stsEndpoint, "https://sts.eu-west-1.amazonaws.com");
  assert.equal(eu.machineAuth.audience, undefined);
});

test("machineAuth bindings are checked: match keys per method, machine patterns, an audience", () => {
  const binding = (b: Record<string, unknown>) => ({
    ...MINIMAL,
    machineAuth: { audience: "bootseal-1", bindings: [{ method: "aws-iam", machines: "prod/*", ...b }] },
  });
  usage(() => validateServiceConfig(binding({ match: { rolearn: "x" } })), /match\.rolearn.*one of arn/);
  usage(() => validateServiceConfig(binding({ match: {} })), /needs at least one attribute/);
  usage(() => validateServiceConfig(binding({ match: { arn: "x" }, machines: "prod" })), /ns\/name/);
  usage(() => validateServiceConfig(binding({ match: { arn: "x" }, machines: "Prod/*" })), /ns\/name/);
  usage(() => validateServiceConfig(binding({ match: { arn: "x" }, machines: [] })), /at least one machine/);
  usage(() => validateServiceConfig(binding({ method: "ldap", match: { arn: "x" } })), /unknown method/);
  usage(
    () =>
      validateServiceConfig({
        ...MINIMAL,
        machineAuth: { bindings: [{ method: "aws-iam", match: { account: "1" }, machines: "a/b" }] },
      }),
    /audience.*required/,
  );
  const ok = validateServiceConfig(
    binding({ match: { account: "111122223333" }, machines: ["prod/*", "dev/web"] }),
  );
  assert.deepEqual(ok.machineAuth.bindings[0]?.machines, [
    { namespace: "prod", name: null },
    { namespace: "dev", name: "web" },
  ]);
});

test("tpm bindings: pcrs and eventLog checked; one source per PCR; an eventLog always has an allowlist", () => {
  const D = "ab".repeat(32);
  const tpm = (b: Record<string, unknown>) => ({
    ...MINIMAL,
    machineAuth: {
      audience: "bootseal-1",
      bindings: [{ method: "tpm", match: { ekCertIssuer: "*" }, machines: "metal/*", ...b }],
    },
  });
  usage(() => validateServiceConfig(tpm({})), /at least one PCR \(pcrs or eventLog.pcrs\)/);
  usage(() => validateServiceConfig(tpm({ pcrs: { "24": D } })), /pcrs.24.*not a PCR index/);
  usage(
    () => validateServiceConfig(tpm({ eventLog: { pcrs: [], allowedDigests: [D] } })),
    /eventLog: .*must NOT have fewer|eventLog.pcrs.*PCRs to replay/,
  );
  usage(
    () => validateServiceConfig(tpm({ eventLog: { pcrs: [4], allowedDigests: [] } })),
    /allowedDigests.*sha256 digests/,
  );
  usage(
    () => validateServiceConfig(tpm({ eventLog: { pcrs: [4], allowedDigests: ["xyz"] } })),
    /allowedDigests.*64 hex/,
  );
  usage(
    () => validateServiceConfig(tpm({ eventLog: { pcrs: [24], allowedDigests: [D] } })),
    /24 is not a PCR index/,
  );
  usage(
    () => validateServiceConfig(tpm({ pcrs: { "4": D }, eventLog: { pcrs: [4], allowedDigests: [D] } })),
    /PCR 4 is in pcrs too/,
  );
  usage(
    () =>
      validateServiceConfig({
        ...MINIMAL,
        machineAuth: {
          audience: "a",
          bindings: [
            {
              method: "gcp",
              match: { project: "p" },
              machines: "a/b",
              eventLog: { pcrs: [4], allowedDigests: [D] },
            },
          ],
        },
      }),
    /eventLog.*tpm bindings only/,
  );
  const ok = validateServiceConfig(
    tpm({ pcrs: { "7": D }, eventLog: { pcrs: [4, 0, 4], allowedDigests: [D.toUpperCase()] } }),
  );
  const b = ok.machineAuth.bindings[0];
  assert.deepEqual(b?.pcrs, { 7: D });
  assert.deepEqual(b?.eventLog?.pcrs, [0, 4]);
  assert.deepEqual([...(b?.eventLog?.allowedDigests ?? [])], [D]);
});

test("globs: * matches any run of characters, everything else is literal", () => {
  assert.ok(globMatches("arn:aws:sts::1:assumed-role/R/*", "arn:aws:sts::1:assumed-role/R/i-0abc"));
  assert.ok(!globMatches("arn:aws:sts::1:assumed-role/R/*", "arn:aws:sts::1:assumed-role/RX/i-0abc"));
  assert.ok(globMatches("a.b", "a.b"));
  assert.ok(!globMatches("a.b", "axb"), "a dot is literal");
  assert.ok(!globMatches("exact", "exact-not"));
});

test("a role ARN (any path) matches that role's sessions only; other attributes all must match", () => {
  const b = parseMachineAuth(
    {
      audience: "x",
      tokenTtl: "1h",
      aws: { region: "us-east-1" },
      bindings: [
        { method: "aws-iam", match: { arn: "arn:aws:iam::111122223333:role/team/web" }, machines: "prod/*" },
        { method: "aws-iam", match: { account: "111122223333", role: "db-*" }, machines: "db/primary" },
      ],
    },
    undefined,
  ).bindings;
  const web = aws("arn:aws:sts::111122223333:assumed-role/web/i-0abc12345678");
  assert.ok(allowedBinding(b, web, { namespace: "prod", name: "anything" }));
  assert.equal(allowedBinding(b, web, { namespace: "db", name: "primary" }), null);
  assert.equal(
    allowedBinding(b, aws("arn:aws:sts::111122223333:assumed-role/webby/s"), {
      namespace: "prod",
      name: "a",
    }),
    null,
  );
  assert.equal(
    allowedBinding(b, aws("arn:aws:sts::999999999999:assumed-role/web/s"), { namespace: "prod", name: "a" }),
    null,
  );
  assert.equal(
    allowedBinding(b, aws("arn:aws:iam::111122223333:user/web"), { namespace: "prod", name: "a" }),
    null,
  );
  assert.ok(
    allowedBinding(b, aws("arn:aws:sts::111122223333:assumed-role/db-main/s"), {
      namespace: "db",
      name: "primary",
    }),
  );
  const gcp: ProvenIdentity = {
    method: "gcp",
    principal: "p",
    attributes: { account: "111122223333", role: "db-x" },
  };
  assert.equal(
    allowedBinding(b, gcp, { namespace: "db", name: "primary" }),
    null,
    "another method never matches",
  );
});

test("instanceIdFromSession: the session must be an instance id and the machine's name", () => {
  const b = parseMachineAuth(
    {
      audience: "x",
      tokenTtl: "1h",
      aws: { region: "us-east-1" },
      bindings: [
        { method: "aws-iam", match: { role: "nodes" }, machines: "k8s/*", instanceIdFromSession: true },
      ],
    },
    undefined,
  ).bindings;
  const id = aws("arn:aws:sts::111122223333:assumed-role/nodes/i-0123456789abcdef0");
  assert.ok(allowedBinding(b, id, { namespace: "k8s", name: "i-0123456789abcdef0" }));
  assert.equal(allowedBinding(b, id, { namespace: "k8s", name: "i-0123456789abcdef1" }), null);
  const named = aws("arn:aws:sts::111122223333:assumed-role/nodes/worker-1");
  assert.equal(allowedBinding(b, named, { namespace: "k8s", name: "worker-1" }), null);
});

test("machineAuthFor: the first binding covering the machine decides; none, a token", () => {
  const b = parseMachineAuth(
    {
      audience: "x",
      tokenTtl: "1h",
      aws: { region: "us-east-1" },
      bindings: [
        { method: "aws-iam", match: { account: "1" }, machines: ["prod/web"] },
        { method: "gcp", match: { project: "p" }, machines: "prod/*" },
      ],
    },
    undefined,
  ).bindings;
  assert.equal(machineAuthFor(b, { namespace: "prod", name: "web" }), "aws-iam");
  assert.equal(machineAuthFor(b, { namespace: "prod", name: "db" }), "gcp");
  assert.equal(machineAuthFor(b, { namespace: "dev", name: "web" }), null);
  assert.equal(machineAuthFor([], { namespace: "prod", name: "web" }), null);
});

const ENDPOINT = new URL("https://sts.us-east-1.amazonaws.com");
const NOW = new Date("2026-03-04T05:06:07Z");
const AUTH =
  "AWS4-HMAC-SHA256 Credential=ASIAEXAMPLE/20260304/us-east-1/sts/aws4_request, " +
  `SignedHeaders=content-type;host;x-amz-date;${SERVER_ID_HEADER}, Signature=${"a".repeat(64)}`;

function signed(headers: Record<string, string> = {}, extra: Record<string, unknown> = {}) {
  return {
    method: "POST",
    url: "https://sts.us-east-1.amazonaws.com/",
    body: "Action=GetCallerIdentity&Version=2011-06-15",
    headers: {
      authorization: AUTH,
      "content-type": "application/x-www-form-urlencoded; charset=utf-8",
      host: "sts.us-east-1.amazonaws.com",
      "x-amz-date": "20260304T050000Z",
      [SERVER_ID_HEADER]: "bootseal-1",
      ...headers,
    },
    ...extra,
  };
}

const check = (req: ReturnType<typeof signed>) =>
  checkSignedRequest(req, { endpoint: ENDPOINT, region: "us-east-1", audience: "bootseal-1", now: NOW });

function refused(fn: () => unknown, pattern: RegExp): void {
  assert.throws(
    fn,
    (err: unknown) =>
      err instanceof BootsealError && err.code === "UNAUTHORIZED" && pattern.test(err.message),
  );
}

test("a signed request's local checks; only signed headers (and Authorization) are replayed", () => {
  const out = check(signed({ "x-forwarded-for": "1.2.3.4" }));
  assert.deepEqual(
    Object.keys(out).sort(),
    ["authorization", "content-type", "host", "x-amz-date", SERVER_ID_HEADER].sort(),
  );
  const withToken = check(signed({ "x-amz-security-token": "FQoG-session" }));
  assert.equal(withToken["x-amz-security-token"], "FQoG-session", "a session token goes along even unsigned");
  refused(() => check(signed({}, { method: "GET" })), /not a POST/);
  refused(() => check(signed({ host: "sts.eu-west-1.amazonaws.com" })), /another STS host/);
  refused(() => check(signed({ "x-amz-date": "20260305T050000Z" })), /disagrees with the signature's scope/);
  refused(
    () => check(signed({ authorization: AUTH.replace("us-east-1/sts", "eu-west-1/sts") })),
    /not for STS in us-east-1/,
  );
  refused(() => check(signed({ authorization: AUTH.replace("/sts/", "/iam/") })), /not for STS/);
  refused(() => check(signed({ authorization: "Bearer x" })), /no AWS SigV4/);
  refused(
    () =>
      check(
        signed({
          authorization: AUTH.replace("content-type;", "content-type;transfer-encoding;"),
          "transfer-encoding": "chunked",
        }),
      ),
    /cannot be a signed header/,
  );
  refused(
    () =>
      check(
        signed({
          authorization: AUTH.replace("content-type;", "content-length;content-type;"),
          "content-length": "5",
        }),
      ),
    /content-length disagrees/,
  );
  refused(
    () => check(signed({}, { url: "https://sts.us-east-1.amazonaws.com/?Action=x" })),
    /another STS endpoint/,
  );
  refused(
    () =>
      decodeSignedRequest(
        Buffer.from(JSON.stringify({ ...signed(), headers: { a: "b\r\nc: d" } })).toString("base64"),
      ),
    /malformed headers/,
  );
  refused(() => decodeSignedRequest(Buffer.from("[1]").toString("base64")), /not a signed request/);
});

const XML = (inner: string) =>
  `<?xml version="1.0"?>\n<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">\n` +
  `<GetCallerIdentityResult>${inner}</GetCallerIdentityResult>` +
  "<ResponseMetadata><RequestId>01234567-89ab</RequestId></ResponseMetadata></GetCallerIdentityResponse>\n";

test("STS's answer is read strictly: Arn, UserId, Account once each, the ARN in that account", () => {
  const ok = parseCallerIdentity(
    XML(
      "<Arn>arn:aws:sts::111122223333:assumed-role/web/i-0abc</Arn><UserId>AROA:i-0abc</UserId><Account>111122223333</Account>",
    ),
  );
  assert.deepEqual(ok, {
    arn: "arn:aws:sts::111122223333:assumed-role/web/i-0abc",
    userId: "AROA:i-0abc",
    account: "111122223333",
  });
  const amp = parseCallerIdentity(
    XML(
      "<Arn>arn:aws:iam::111122223333:user/a&amp;b</Arn><UserId>AIDA</UserId><Account>111122223333</Account>",
    ),
  );
  assert.equal(amp.arn, "arn:aws:iam::111122223333:user/a&b");
  const bad = [
    XML(
      "<Arn>arn:aws:iam::111122223333:user/a</Arn><Arn>arn:aws:iam::111122223333:user/b</Arn><UserId>x</UserId><Account>111122223333</Account>",
    ),
    XML("<Arn>arn:aws:iam::999999999999:user/a</Arn><UserId>x</UserId><Account>111122223333</Account>"),
    XML("<Arn>arn:aws:iam::111122223333:user/a</Arn><Account>111122223333</Account>"),
    "<ErrorResponse><Error><Code>SignatureDoesNotMatch</Code></Error></ErrorResponse>",
    `${XML("<Arn>arn:aws:iam::111122223333:user/a</Arn><UserId>x</UserId><Account>111122223333</Account>")}<extra/>`,
  ];
  for (const xml of bad) refused(() => parseCallerIdentity(xml), /other than a GetCallerIdentity result/);
});

test("AWS attributes: role and session for an assumed role only", () => {
  assert.deepEqual(aws("arn:aws:sts::111122223333:assumed-role/web/i-0abc").attributes, {
    arn: "arn:aws:sts::111122223333:assumed-role/web/i-0abc",
    account: "111122223333",
    userId: "AROAEXAMPLE:session",
    role: "web",
    session: "i-0abc",
  });
  assert.equal(aws("arn:aws:iam::111122223333:user/web").attributes.role, undefined);
});

test("loginFlags: what a stub passes so the machine signs for what this service checks", () => {
  const c = validateServiceConfig({
    ...MINIMAL,
    publicUrl: "https://boot.example.com",
    machineAuth: { aws: { region: "eu-west-1" } },
  });
  assert.deepEqual(loginFlags(c.machineAuth, "aws-iam"), [
    "--auth",
    "aws-iam",
    "--server-id",
    "https://boot.example.com",
    "--aws-sts-region",
    "eu-west-1",
    "--aws-sts-endpoint",
    "https://sts.eu-west-1.amazonaws.com",
  ]);
  assert.deepEqual(loginFlags(c.machineAuth, "gcp"), [
    "--auth",
    "gcp",
    "--server-id",
    "https://boot.example.com",
  ]);
});
