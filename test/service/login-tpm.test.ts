/**
 * Machine login with a TPM, against two real software TPMs (the swtpm peer: swtpm 0.7.1, EK
 * certificates from swtpm_setup's local CA) driven by tpm2-tools, the fetcher's own TPM client.
 * End to end: the real `bootseal fetch --auth tpm` logs in at the real service app on loopback,
 * fetches and reports. In process: every refusal by its reason code (a replayed nonce, a quote
 * from another TPM, an AK not bound to the EK, an EK outside the trusted chain, a changed PCR),
 * and tpm2_checkquote, an independent implementation, agrees with the service on every quote.
 */
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import type { FastifyInstance } from "fastify";
import { parseMachineAuth } from "../../src/config/machine-auth.ts";
import { tpmProvider } from "../../src/fetcher/identity/tpm.ts";
import type {
  TpmChallengeRequest,
  TpmChallengeResponse,
  TpmLoginCredential,
} from "../../src/machine/identity-login.ts";
import { ageKey, tempDir } from "../fetcher/helpers.ts";
import { peer } from "../helpers/peers.ts";
import { lockSwtpm, pcrValues, tpm2 } from "../helpers/swtpm.ts";
import { sha256, type TcgEvent, tcgEventLog } from "../helpers/tcg-event-log.ts";
import { ADMIN, fetchWithLogin, loginService, phasesOf, publishAs } from "./login-harness.ts";

const AUDIENCE = "https://bootseal-tpm.login.test";
const TCTI = peer("SWTPM_TCTI");
const OTHER_TCTI = peer("SWTPM_OTHER_TCTI");
const EK_CA = peer("SWTPM_EK_CA");
const PCRS = [0, 7];

let dir: { path: string; remove: () => Promise<void> };
let key: Awaited<ReturnType<typeof ageKey>>;
let app: FastifyInstance;
let url: string;
let expected: Record<string, string>;

/**
 * The service with a tpm binding for prod/* (PCRs 0 and 7 as read at the start, or `binding`'s
 * checks); its creation rule the age key, or `rules` as given.
 */
function service(rules?: string, binding: Record<string, unknown> = { pcrs: expected }): FastifyInstance {
  return loginService(
    key.recipient,
    parseMachineAuth(
      {
        audience: AUDIENCE,
        tokenTtl: "1h",
        aws: { region: "us-east-1" },
        tpm: { ekCaFile: EK_CA },
        bindings: [{ method: "tpm", match: { ekCertIssuer: "*" }, machines: "prod/*", ...binding }],
      },
      undefined,
    ),
    rules,
  );
}

let releaseSwtpm: (() => Promise<void>) | undefined;

before(async () => {
  releaseSwtpm = await lockSwtpm();
  dir = await tempDir("login-tpm");
  key = await ageKey(dir.path, "machine");
  expected = await pcrValues(TCTI, PCRS);
  app = service();
  url = await app.listen({ host: "127.0.0.1", port: 0 });
  await publishAs(app, "prod/web-1", "tpm-attested secret\n");
  // The in-process logins: a config stays published for web-2 (web-1's goes once fetched).
  await publishAs(app, "prod/web-2", "another secret\n");
});
after(async () => {
  await app?.close();
  await dir?.remove();
  await releaseSwtpm?.();
});

/** What the machine sent and got, step by step, with a hook to tamper with the challenge. */
interface Exchange {
  request: TpmChallengeRequest;
  challenge: TpmChallengeResponse;
  credential: string;
}

async function postChallenge(machine: string, request: unknown) {
  return app.inject({
    method: "POST",
    url: `/v1/machines/${machine}/login/challenge`,
    payload: request as object,
  });
}

async function postLogin(machine: string, credential: string) {
  return app.inject({
    method: "POST",
    url: `/v1/machines/${machine}/login`,
    payload: { method: "tpm", credential },
  });
}

/** The fetcher's TPM provider on `tcti`, its challenge asked of the app (optionally rewritten). */
async function attest(
  tcti: string,
  machine = "prod/web-2",
  rewrite: (r: TpmChallengeRequest) => Promise<TpmChallengeRequest> | TpmChallengeRequest = (r) => r,
): Promise<Exchange> {
  const seen: Partial<Exchange> = {};
  const credential = await tpmProvider().credential({
    audience: AUDIENCE,
    env: { PATH: process.env.PATH, BOOTSEAL_TPM_TCTI: tcti },
    challenge: async (request) => {
      seen.request = await rewrite(request);
      const res = await postChallenge(machine, seen.request);
      assert.equal(res.statusCode, 200, res.body);
      seen.challenge = res.json() as TpmChallengeResponse;
      return seen.challenge;
    },
  });
  return { ...(seen as Exchange), credential };
}

/** tpm2_checkquote's verdict on the exchange's quote: the AK's signature and the nonce. */
async function checkquote(x: Exchange, akPublic = x.request.akPublic): Promise<boolean> {
  const work = await mkdtemp(join(tmpdir(), "tpm-checkquote-"));
  try {
    const c = JSON.parse(Buffer.from(x.credential, "base64").toString()) as TpmLoginCredential;
    await writeFile(join(work, "ak.pub"), Buffer.from(akPublic, "base64"));
    await writeFile(join(work, "q.msg"), Buffer.from(c.attest, "base64"));
    await writeFile(join(work, "q.sig"), Buffer.from(c.signature, "base64"));
    const nonce = Buffer.from(x.challenge.nonce, "base64url").toString("hex");
    await tpm2(
      "none",
      ["tpm2_checkquote", "-u", "ak.pub", "-m", "q.msg", "-s", "q.sig", "-g", "sha256", "-q", nonce],
      work,
    );
    return true;
  } catch {
    return false;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The quote's PCR digest equals sha256 over the binding's values (what the service compares). */
function digestOfExpected(): string {
  const h = createHash("sha256");
  for (const i of PCRS) h.update(Buffer.from(expected[String(i)] as string, "hex"));
  return h.digest("hex");
}

/** An EK and an AK of the other TPM in `work` (ek.ctx, ak.ctx, ak.pub). */
async function makeOtherAk(work: string): Promise<void> {
  await tpm2(OTHER_TCTI, ["tpm2_flushcontext", "-t"]);
  await tpm2(OTHER_TCTI, ["tpm2_createek", "-c", "ek.ctx", "-G", "rsa", "-u", "ek.pub"], work);
  await tpm2(OTHER_TCTI, ["tpm2_flushcontext", "-t"]);
  await tpm2(
    OTHER_TCTI,
    [
      "tpm2_createak",
      "-C",
      "ek.ctx",
      "-c",
      "ak.ctx",
      "-G",
      "rsa",
      "-g",
      "sha256",
      "-s",
      "rsassa",
      "-u",
      "ak.pub",
    ],
    work,
  );
  await tpm2(OTHER_TCTI, ["tpm2_flushcontext", "-t"]);
}

/** The real `bootseal fetch --auth tpm` on TPM a against `base`, with more environment if given. */
function tpmFetch(base: string, machine: string, env: Record<string, string> = {}, deadline?: string) {
  return fetchWithLogin({
    dir: dir.path,
    base,
    machine,
    method: "tpm",
    serverId: AUDIENCE,
    env: { BOOTSEAL_TPM_TCTI: TCTI, PATH: process.env.PATH ?? "", ...env },
    ...(deadline ? { deadline } : {}),
  });
}

function refusal(res: { statusCode: number; body: string }, status: number, reason: string): void {
  assert.equal(res.statusCode, status, res.body);
  assert.match(res.body, new RegExp(`tpm login refused \\(${reason}\\)`));
}

test("tpm (swtpm): bootseal fetch --auth tpm logs in with the TPM, fetches, writes and reports succeeded", async () => {
  const { r, root } = await tpmFetch(url, "prod/web-1", { SOPS_AGE_KEY_FILE: key.file });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "tpm-attested secret\n");
  assert.ok((await phasesOf(app, "prod/web-1")).includes("succeeded"));
});

test("tpm (swtpm): a good quote is accepted by tpm2_checkquote and the service; its nonce is single use", async () => {
  const x = await attest(TCTI);
  assert.deepEqual(x.challenge.pcrs, PCRS);
  assert.equal(await checkquote(x), true);
  const c = JSON.parse(Buffer.from(x.credential, "base64").toString()) as TpmLoginCredential;
  assert.equal(Buffer.from(c.attest, "base64").subarray(-32).toString("hex"), digestOfExpected());
  assert.equal((await postLogin("prod/web-2", x.credential)).statusCode, 200);
  // The same quote again: its nonce is spent (tpm2_checkquote cannot know; the service does).
  refusal(await postLogin("prod/web-2", x.credential), 401, "nonce-unknown");
});

test("tpm (swtpm): a quote from another TPM is refused (quote-signature); tpm2_checkquote agrees", async () => {
  const a = await attest(TCTI);
  // The other TPM, enrolled nowhere, quotes the same nonce with its own AK.
  const work = await mkdtemp(join(tmpdir(), "tpm-other-"));
  try {
    await makeOtherAk(work);
    const nonce = Buffer.from(a.challenge.nonce, "base64url").toString("hex");
    await tpm2(
      OTHER_TCTI,
      [
        "tpm2_quote",
        "-c",
        "ak.ctx",
        "-l",
        "sha256:0,7",
        "-q",
        nonce,
        "-m",
        "q.msg",
        "-s",
        "q.sig",
        "-g",
        "sha256",
      ],
      work,
    );
    await tpm2(OTHER_TCTI, ["tpm2_flushcontext", "-t"]);
    const good = JSON.parse(Buffer.from(a.credential, "base64").toString()) as TpmLoginCredential;
    const forged: TpmLoginCredential = {
      ...good,
      attest: (await readFile(join(work, "q.msg"))).toString("base64"),
      signature: (await readFile(join(work, "q.sig"))).toString("base64"),
    };
    const x = { ...a, credential: Buffer.from(JSON.stringify(forged)).toString("base64") };
    assert.equal(await checkquote(x), false);
    refusal(await postLogin("prod/web-2", x.credential), 401, "quote-signature");
  } finally {
    await rm(work, { recursive: true, force: true });
  }
});

test("tpm (swtpm): an AK not bound to the EK (another TPM's AK under this EK) is refused (credential-not-activated)", async () => {
  const work = await mkdtemp(join(tmpdir(), "tpm-ak-"));
  try {
    await makeOtherAk(work);
    const otherAk = (await readFile(join(work, "ak.pub"))).toString("base64");
    // The trusted EK of TPM a with the other TPM's AK: TPM a cannot activate for that AK.
    const res = await postChallenge("prod/web-2", {
      ...(await attest(TCTI).then((x) => x.request)),
      akPublic: otherAk,
    });
    assert.equal(res.statusCode, 200, res.body);
    const challenge = res.json() as TpmChallengeResponse;
    const guess: TpmLoginCredential = {
      nonce: challenge.nonce,
      secret: Buffer.alloc(32).toString("base64"),
      attest: "",
      signature: "",
    };
    refusal(
      await postLogin("prod/web-2", Buffer.from(JSON.stringify(guess)).toString("base64")),
      401,
      "credential-not-activated",
    );
  } finally {
    await rm(work, { recursive: true, force: true });
  }
});

test("tpm (swtpm): an EK whose certificate is from another CA, and not enrolled, is refused (ek-untrusted)", async () => {
  await assert.rejects(attest(OTHER_TCTI), /ek-untrusted/);
});

test("tpm (swtpm): a config sealed to the machine's TPM under a PCR 7 policy: TPM login, fetch, unseal in the TPM, succeeded; no other key anywhere", async () => {
  // The EK public key as a cloud API or an inventory hands it to the controller.
  const ek = join(dir.path, "ek-a.pem");
  await tpm2(TCTI, ["tpm2_createek", "-c", join(dir.path, "ek-a.ctx"), "-G", "rsa", "-u", ek, "-f", "pem"]);
  await tpm2(TCTI, ["tpm2_flushcontext", "-t"]);
  const sealed = service(`creation_rules:\n  - tpm_ek: "${ek}#7=${expected["7"]}"\n`);
  const base = await sealed.listen({ host: "127.0.0.1", port: 0 });
  try {
    await publishAs(sealed, "prod/bare-1", "sealed to one TPM\n");
    const stored = await sealed.inject({
      method: "GET",
      url: "/v1/machines/prod/bare-1/config",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    const doc = JSON.parse(stored.body) as { sops: Record<string, unknown> };
    assert.ok(
      Array.isArray(doc.sops.tpm) && doc.sops.age === undefined,
      "the data key is wrapped to the TPM alone",
    );
    const { r, root } = await tpmFetch(base, "prod/bare-1");
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "sealed to one TPM\n");
    assert.ok((await phasesOf(sealed, "prod/bare-1")).includes("succeeded"));
  } finally {
    await sealed.close();
  }
});

test("tpm (swtpm): the EK sent with the publish (X-Bootseal-Tpm-Ek, as the controller sends it) to a rule's `tpm_ek: publish#7=…`: sealed to that TPM alone, TPM login, unseal, succeeded; another trusted TPM is refused at login for it (ek-not-sealed-to)", async () => {
  // The EK as a cloud API or an inventory gives it: SubjectPublicKeyInfo, DER, one base64 line.
  const ekOf = async (tcti: string, name: string) => {
    const der = join(dir.path, `${name}.der`);
    await tpm2(tcti, [
      "tpm2_createek",
      "-c",
      join(dir.path, `${name}.ctx`),
      "-G",
      "rsa",
      "-u",
      der,
      "-f",
      "der",
    ]);
    await tpm2(tcti, ["tpm2_flushcontext", "-t"]);
    return (await readFile(der)).toString("base64");
  };
  const ek = await ekOf(TCTI, "ek-publish");
  const sealed = service(`creation_rules:\n  - tpm_ek: "publish#7=${expected["7"]}"\n`);
  const base = await sealed.listen({ host: "127.0.0.1", port: 0 });
  try {
    await publishAs(sealed, "prod/bare-2", "sealed per publish\n", { "x-bootseal-tpm-ek": ek });
    // Another machine's config, sealed to the other TPM's EK: this TPM cannot open it.
    await publishAs(sealed, "prod/bare-3", "not for TPM a\n", {
      "x-bootseal-tpm-ek": await ekOf(OTHER_TCTI, "ek-other"),
    });
    const stored = await sealed.inject({
      method: "GET",
      url: "/v1/machines/prod/bare-2/config",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    const doc = JSON.parse(stored.body) as { sops: { tpm?: { ek_public: string; pcrs: string }[] } };
    assert.deepEqual(
      doc.sops.tpm?.map((t) => [t.ek_public, t.pcrs]),
      [[ek, "sha256:7"]],
      "one tpm key: the publish's EK under the rule's PCR 7 policy",
    );
    const { r, root } = await tpmFetch(base, "prod/bare-2");
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "sealed per publish\n");
    assert.ok((await phasesOf(sealed, "prod/bare-2")).includes("succeeded"));
    // TPM a is trusted for prod/* too, but bare-3's config is sealed to the other TPM: its
    // login is refused (it could not decrypt; it could report bare-3's phases or have a one-time
    // config deleted), and nothing was fetched.
    const other = await tpmFetch(base, "prod/bare-3");
    assert.notEqual(other.r.code, 0);
    assert.match(other.r.stderr, /tpm login refused \(ek-not-sealed-to\)/);
    assert.deepEqual(await phasesOf(sealed, "prod/bare-3"), ["published"]);
  } finally {
    await sealed.close();
  }
});

test("tpm (swtpm): after PCR 7 is extended the machine is refused (pcr-mismatch); tpm2_checkquote still verifies the signature", async () => {
  await tpm2(TCTI, ["tpm2_pcrextend", `7:sha256=${"ab".repeat(32)}`]);
  const x = await attest(TCTI);
  assert.equal(await checkquote(x), true);
  const c = JSON.parse(Buffer.from(x.credential, "base64").toString()) as TpmLoginCredential;
  assert.notEqual(Buffer.from(c.attest, "base64").subarray(-32).toString("hex"), digestOfExpected());
  refusal(await postLogin("prod/web-2", x.credential), 401, "pcr-mismatch");
});

/** A login on `svc` with the real TPM client, its credential edited before it is sent. */
async function tpmLogin(
  svc: FastifyInstance,
  machine: string,
  env: Record<string, string>,
  edit: (c: Record<string, unknown>) => Record<string, unknown> = (c) => c,
) {
  const credential = await tpmProvider().credential({
    audience: AUDIENCE,
    env: { PATH: process.env.PATH, BOOTSEAL_TPM_TCTI: TCTI, ...env },
    challenge: async (request) => {
      const res = await svc.inject({
        method: "POST",
        url: `/v1/machines/${machine}/login/challenge`,
        payload: request,
      });
      assert.equal(res.statusCode, 200, res.body);
      return res.json() as TpmChallengeResponse;
    },
  });
  const sent = edit(JSON.parse(Buffer.from(credential, "base64").toString()) as Record<string, unknown>);
  return svc.inject({
    method: "POST",
    url: `/v1/machines/${machine}/login`,
    payload: { method: "tpm", credential: Buffer.from(JSON.stringify(sent)).toString("base64") },
  });
}

test("tpm (swtpm): a binding's eventLog replays PCR 23 from the machine's measured-boot log (every event allowed) beside PCR 7's fixed value: bootseal fetch sends the log and succeeds; a log that is not this boot's, an event off the allowlist, no log, a damaged log and PCR values that are not the quoted ones are each refused with their own reason", async () => {
  const event = (data: string, type = 0xd): TcgEvent => ({
    pcr: 23,
    type,
    digest: sha256(data),
    data: Buffer.from(data),
  });
  const separator: TcgEvent = { pcr: 23, type: 0x4, digest: sha256(Buffer.alloc(4)), data: Buffer.alloc(4) };
  const booted = [event("shim 15.8"), event("grub 2.12"), separator];
  // The firmware's part, played by the test: PCR 23 (resettable) extended with the boot's events.
  await tpm2(TCTI, ["tpm2_pcrreset", "23"]);
  for (const e of booted) await tpm2(TCTI, ["tpm2_pcrextend", `23:sha256=${e.digest.toString("hex")}`]);
  const write = async (name: string, events: readonly TcgEvent[] | Buffer) => {
    const file = join(dir.path, name);
    await writeFile(file, Buffer.isBuffer(events) ? events : tcgEventLog(events));
    return file;
  };
  const good = await write("boot.log", booted);
  const allowed = [...booted, event("grub 2.12 (evil)")].map((e) => e.digest.toString("hex"));
  const svc = service(undefined, {
    // Read now: an earlier test extends PCR 7.
    pcrs: { "7": (await pcrValues(TCTI, [7]))["7"] as string },
    eventLog: { pcrs: [23], allowedDigests: allowed },
  });
  const base = await svc.listen({ host: "127.0.0.1", port: 0 });
  try {
    await publishAs(svc, "prod/measured-1", "measured boot\n");
    const { r, root } = await tpmFetch(base, "prod/measured-1", {
      BOOTSEAL_TPM_EVENT_LOG: good,
      SOPS_AGE_KEY_FILE: key.file,
    });
    assert.equal(r.code, 0, r.stderr);
    assert.equal(await readFile(join(root, "etc/bootseal/secret.txt"), "utf8"), "measured boot\n");

    // An allowed log, but not what this TPM measured (another boot loader was extended).
    const other = await write("other.log", [event("shim 15.8"), event("grub 2.12 (evil)"), separator]);
    const replay = await tpmLogin(svc, "prod/measured-1", { BOOTSEAL_TPM_EVENT_LOG: other });
    refusal(replay, 401, "event-log-replay");
    assert.match(replay.body, /PCR 23 is [0-9a-f]{64} in the TPM/);
    type Edit = (c: Record<string, unknown>) => Record<string, unknown>;
    const unknown = await write("unknown.log", [event("shim 15.8"), event("unsigned kernel"), separator]);
    const damaged = await write("damaged.log", tcgEventLog(booted).subarray(0, 70));
    const cases: [string, string, Edit?][] = [
      // An event the allowlist does not have (checked before the replay).
      ["event-log-digest", unknown],
      // No log, and a damaged one.
      ["event-log-missing", good, (c) => ({ ...c, eventLog: undefined })],
      ["event-log-malformed", damaged],
      // PCR values that are not the quoted ones cannot point the blame elsewhere.
      ["pcr-values", other, (c) => ({ ...c, pcrValues: Buffer.alloc(64, 7).toString("base64") })],
    ];
    for (const [reason, log, edit] of cases)
      refusal(await tpmLogin(svc, "prod/measured-1", { BOOTSEAL_TPM_EVENT_LOG: log }, edit), 401, reason);
    // The fetcher itself: a binding that asks for a log the machine does not have.
    const missing = await tpmFetch(
      base,
      "prod/measured-1",
      { BOOTSEAL_TPM_EVENT_LOG: join(dir.path, "absent.log") },
      "1s",
    );
    assert.notEqual(missing.r.code, 0);
    assert.match(missing.r.stderr, /asks for the TPM event log and .*absent\.log cannot be read/);
  } finally {
    await svc.close();
    await tpm2(TCTI, ["tpm2_pcrreset", "23"]).catch(() => undefined);
  }
});
