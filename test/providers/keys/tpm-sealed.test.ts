/**
 * `tpm` keys: the data key sealed with node:crypto alone to a TPM's endorsement key, unsealed
 * on two real software TPMs (the swtpm peer) by tpm2-tools, an independent implementation of
 * TPM2_Import and PolicyPCR: TPM a unseals, TPM a with the policy's PCR extended refuses,
 * TPM "other" refuses the import. Then the whole CLI: `bootseal encrypt --tpm-ek` and
 * `bootseal decrypt` with BOOTSEAL_TPM_TCTI. PCR 16 (the resettable debug PCR) carries the
 * policy, so the login test's PCRs 0 and 7 on the same TPM stay as they are.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { tpmSealedKeyType } from "../../../providers/keys/tpm-sealed.ts";
import { pcrPolicyDigest } from "../../../providers/keys/tpm-sealed-object.ts";
import { unsealWithTpm } from "../../../providers/keys/tpm-sealed-unseal.ts";
import { hasCode } from "../../../src/errors.ts";
import { tempDir } from "../../fetcher/helpers.ts";
import { runBootsealInProcess } from "../../helpers/cli-in-process.ts";
import { peer } from "../../helpers/peers.ts";
import { lockSwtpm, pcrValues, tpm2 } from "../../helpers/swtpm.ts";

const TCTI = peer("SWTPM_TCTI");
const OTHER_TCTI = peer("SWTPM_OTHER_TCTI");
const PCR = 16;

const pcrValue = async (tcti: string): Promise<string> => (await pcrValues(tcti, [PCR]))[PCR] as string;

/** The TPM's RSA EK public key as PEM, the form a cloud API hands out. */
async function ekPem(tcti: string, file: string): Promise<string> {
  await tpm2(tcti, ["tpm2_createek", "-c", join(dir.path, "ek.ctx"), "-G", "rsa", "-u", file, "-f", "pem"]);
  await tpm2(tcti, ["tpm2_flushcontext", "-t"]);
  return readFile(file, "utf8");
}

let dir: { path: string; remove: () => Promise<void> };
let ekA: string;
let ekOther: string;

let releaseSwtpm: (() => Promise<void>) | undefined;

before(async () => {
  releaseSwtpm = await lockSwtpm();
  dir = await tempDir("tpm-sealed");
  await tpm2(TCTI, ["tpm2_pcrreset", String(PCR)]);
  ekA = join(dir.path, "ek-a.pem");
  ekOther = join(dir.path, "ek-other.pem");
  await ekPem(TCTI, ekA);
  await ekPem(OTHER_TCTI, ekOther);
});

after(async () => {
  await tpm2(TCTI, ["tpm2_pcrreset", String(PCR)]).catch(() => undefined);
  await dir.remove();
  await releaseSwtpm?.();
});

const env = (tcti: string) => ({ PATH: process.env.PATH, BOOTSEAL_TPM_TCTI: tcti });

test("tpm (swtpm): sealed with node:crypto only, TPM a unseals the data key with tpm2-tools", async () => {
  const dataKey = randomBytes(32);
  const [key] = tpmSealedKeyType.fromUserInput(ekA, { env: env(TCTI) });
  assert.ok(key);
  const enc = await key.wrap(dataKey);
  const entry = key.toMetadata(enc, new Date());
  assert.deepEqual([...entry.fields.keys()], ["ek_public", "created_at", "enc"]);
  const back = await tpmSealedKeyType.fromMetadata(entry, { env: env(TCTI) }).unwrap(enc);
  assert.deepEqual(back && Buffer.from(back), dataKey);
});

test("tpm (swtpm): the PolicyPCR digest is tpm2_policypcr's, TPM a unseals in that state and refuses after an extend", async () => {
  const value = await pcrValue(TCTI);
  // tpm2_policypcr in a trial session: the TPM's own digest of the same policy.
  await tpm2(TCTI, ["tpm2_startauthsession", "-S", "trial.ctx"], dir.path);
  await tpm2(
    TCTI,
    ["tpm2_policypcr", "-S", "trial.ctx", "-l", `sha256:${PCR}`, "-L", "policy.bin"],
    dir.path,
  );
  await tpm2(TCTI, ["tpm2_flushcontext", "trial.ctx"], dir.path);
  const expected = await readFile(join(dir.path, "policy.bin"));
  assert.deepEqual(pcrPolicyDigest(new Map([[PCR, Buffer.from(value, "hex")]])), expected);

  const deps = { env: env(TCTI) };
  const [key] = tpmSealedKeyType.fromUserInput(`${ekA}#${PCR}=${value}`, deps);
  assert.ok(key);
  const dataKey = randomBytes(32);
  const enc = await key.wrap(dataKey);
  const entry = key.toMetadata(enc, new Date());
  assert.equal(entry.fields.get("pcrs"), `sha256:${PCR}`);
  assert.equal(entry.fields.get("policy"), expected.toString("hex"));
  const sealed = tpmSealedKeyType.fromMetadata(entry, deps);
  assert.deepEqual(Buffer.from((await sealed.unwrap(enc)) ?? []), dataKey);

  await tpm2(TCTI, ["tpm2_pcrextend", `${PCR}:sha256=${"ab".repeat(32)}`]);
  try {
    await assert.rejects(sealed.unwrap(enc), (err: unknown) => {
      assert.ok(hasCode(err, "KEY_UNAVAILABLE"), String(err));
      assert.match((err as Error).message, /tpm2_unseal: .*policy/i);
      assert.doesNotMatch((err as Error).message, /\n/);
      return true;
    });
  } finally {
    await tpm2(TCTI, ["tpm2_pcrreset", String(PCR)]);
  }
});

test("tpm (swtpm): another TPM is not the key (null), and its TPM refuses the import", async () => {
  const [key] = tpmSealedKeyType.fromUserInput(ekA, {});
  assert.ok(key);
  const dataKey = randomBytes(32);
  const enc = await key.wrap(dataKey);
  const entry = key.toMetadata(enc, new Date());
  assert.equal(await tpmSealedKeyType.fromMetadata(entry, { env: env(OTHER_TCTI) }).unwrap(enc), null);
  // Past the EK check: the other TPM's EK cannot recover the seed, so TPM2_Import fails.
  const session = { tcti: OTHER_TCTI, who: "a tpm key", path: process.env.PATH };
  const sealedTo = { ekSha256: "", ekType: "rsa" as const, pcrs: [] };
  await assert.rejects(
    unsealWithTpm(session, sealedTo, Buffer.from(enc, "base64"), { skipEkCheck: true }),
    (err: unknown) => {
      assert.ok(hasCode(err, "KEY_UNAVAILABLE"), String(err));
      assert.match((err as Error).message, /tpm2_import/);
      return true;
    },
  );
});

test("tpm: malformed keys and entries are BAD_INPUT, one line", () => {
  const bad = [
    "no-such-ek.pem",
    `${"QUFB".repeat(20)}`,
    "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----",
  ];
  for (const text of bad) {
    assert.throws(
      () => tpmSealedKeyType.entryFromText(text, { kmsContext: null, awsProfile: "" }),
      (err) => hasCode(err, "BAD_INPUT"),
    );
  }
  for (const suffix of ["#24=00", `#7=${"0".repeat(63)}`, "#7"]) {
    assert.throws(
      () => tpmSealedKeyType.fromUserInput(`${ekA}${suffix}`, {}),
      (err) => hasCode(err, "BAD_INPUT") && !(err as Error).message.includes("\n"),
      suffix,
    );
  }
  const [key] = tpmSealedKeyType.fromUserInput(ekA, {});
  assert.ok(key);
  const entry = key.toMetadata("AAAA", new Date());
  const fields = new Map(entry.fields);
  fields.set("pcrs", "sha256:7");
  assert.throws(
    () => tpmSealedKeyType.fromMetadata({ ...entry, fields }, {}),
    (err) => hasCode(err, "BAD_INPUT"),
  );
});

test("tpm (swtpm): bootseal encrypt --tpm-ek, then bootseal decrypt on TPM a; TPM other cannot", async () => {
  const value = await pcrValue(TCTI);
  const plain = "password: hunter2\n";
  await writeFile(join(dir.path, "secret.yaml"), plain);
  const enc = await runBootsealInProcess(
    ["encrypt", "--tpm-ek", `${ekA}#${PCR}=${value}`, join(dir.path, "secret.yaml")],
    {
      env: { PATH: process.env.PATH },
      cwd: dir.path,
    },
  );
  assert.equal(enc.status, 0, enc.stderr);
  const doc = enc.stdout.toString();
  assert.match(doc, /\n {4}tpm:\n {8}- created_at: .*\n {10}ek_public: /);
  await writeFile(join(dir.path, "secret.enc.yaml"), doc);
  const dec = await runBootsealInProcess(["decrypt", join(dir.path, "secret.enc.yaml")], {
    env: env(TCTI),
    cwd: dir.path,
  });
  assert.equal(dec.status, 0, dec.stderr);
  assert.equal(dec.stdout.toString(), plain);
  const other = await runBootsealInProcess(["decrypt", join(dir.path, "secret.enc.yaml")], {
    env: env(OTHER_TCTI),
    cwd: dir.path,
  });
  assert.notEqual(other.status, 0);
  assert.equal(other.stdout.length, 0);
  assert.match(other.stderr, /tpm:[0-9a-f]{64}/);
});
