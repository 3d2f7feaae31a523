/**
 * `publish FILE` side by side with the real sops 3.13.2 on the same `.sops.yaml`
 * destination_rules: S3 (SeaweedFS), GCS (fake-gcs-server), Vault KV v2 and v1 (OpenBao).
 * Each case publishes with sops, reads what the destination holds, publishes the same file
 * with bootseal, reads again and compares: the same bytes where the file goes as it is, the
 * same plaintext and key recipients where the recreation rule re-encrypts it (a new data key
 * each time, so never the same bytes), and the same secret data in Vault. Then the prompts,
 * --recursive, --omit-extensions and the failures, with sops's texts and exit codes.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { GetObjectCommand } from "@aws-sdk/client-s3";
import { peer, uniqueName } from "../helpers/peers.ts";
import { rawS3, seaweedfs } from "../helpers/s3.ts";
import { gcsBucket, s3Bucket } from "../providers/stores/peer-buckets.ts";
import { createHarness, type Harness, ok, type RunResult } from "./harness.ts";

let h: Harness;
let env: NodeJS.ProcessEnv;
let s3: string;
let gcs: string;
let second: { recipient: string; keyFile: string };
const vaultAddr = () => peer("VAULT_ADDR");
const token = () => peer("VAULT_TOKEN");
let kv1: string;
type Tool = "sops" | "bootseal";
const TOOLS: readonly Tool[] = ["sops", "bootseal"];

async function vault(method: string, path: string, body?: unknown): Promise<Response> {
  return fetch(`${vaultAddr()}/v1/${path}`, {
    method,
    headers: { "x-vault-token": token(), "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
}

async function s3Object(key: string): Promise<string> {
  const out = await rawS3(seaweedfs()).send(new GetObjectCommand({ Bucket: s3, Key: key }));
  return (await out.Body?.transformToString()) ?? "";
}

async function gcsObject(key: string): Promise<string> {
  const res = await fetch(
    `${peer("GCS_ENDPOINT")}/storage/v1/b/${gcs}/o/${encodeURIComponent(key)}?alt=media`,
  );
  assert.equal(res.status, 200, `gcs ${key}`);
  return res.text();
}

/** The secret's data as the KV API returns it (v2: data.data; v1: data). */
async function secret(path: string, version: 1 | 2): Promise<unknown> {
  const res = await vault("GET", path);
  assert.equal(res.status, 200, `vault ${path}`);
  const body = (await res.json()) as { data: { data?: unknown } };
  return version === 2 ? body.data.data : body.data;
}

/** A file in the harness directory, encrypted by the real sops with the first age key. */
function sopsFile(rel: string, plain: string): string {
  const path = join(h.dir, rel);
  mkdirSync(join(path, ".."), { recursive: true });
  // The plaintext lies outside the published trees (--recursive takes every file).
  const plainPath = join(h.dir, "plain", rel.replaceAll("/", "_"));
  mkdirSync(join(h.dir, "plain"), { recursive: true });
  writeFileSync(plainPath, plain);
  writeFileSync(path, execFileSync(peer("SOPS_BIN"), ["-e", "--age", h.ageRecipient, plainPath], { env }));
  return rel;
}

const PLAIN = "a: 1\nb: hello\nc:\n  d: [1, two, {e: f}]\n  f: 1.5e-7\n# a comment\nt: true\nn: null\n";

before(async () => {
  h = createHarness();
  const keyFile = join(h.dir, "second.txt");
  execFileSync(peer("AGE_KEYGEN_BIN"), ["-o", keyFile], { stdio: "ignore" });
  const recipient = /public key: (age1\w+)/.exec(readFileSync(keyFile, "utf8"))?.[1] ?? "";
  second = { recipient, keyFile };
  s3 = await s3Bucket(seaweedfs());
  gcs = (await gcsBucket()).bucket;
  kv1 = uniqueName("kv1");
  assert.equal(
    (await vault("POST", `sys/mounts/${kv1}`, { type: "kv", options: { version: "1" } })).status,
    204,
  );
  env = {
    ...h.env,
    AWS_ACCESS_KEY_ID: peer("S3_SEAWEEDFS_ACCESS_KEY"),
    AWS_SECRET_ACCESS_KEY: peer("S3_SEAWEEDFS_SECRET_KEY"),
    AWS_ENDPOINT_URL_S3: peer("S3_SEAWEEDFS_ENDPOINT"),
    AWS_REGION: "us-east-1",
    STORAGE_EMULATOR_HOST: peer("GCS_ENDPOINT").replace(/^http:\/\//, ""),
    VAULT_ADDR: vaultAddr(),
    VAULT_TOKEN: token(),
  };
  // Rules match the raw operand (sops does not make it relative to the config file).
  writeFileSync(
    join(h.dir, ".sops.yaml"),
    [
      "destination_rules:",
      "  - path_regex: ^s3/",
      `    s3_bucket: ${s3}`,
      "    s3_prefix: re/",
      "    recreation_rule:",
      `      age: ${second.recipient}`,
      "  - path_regex: ^raw/",
      `    s3_bucket: ${s3}`,
      "    s3_prefix: raw-",
      "  - path_regex: ^gcs/",
      `    gcs_bucket: ${gcs}`,
      "    gcs_prefix: g/",
      "  - path_regex: ^v2/",
      "    vault_path: sops-publish-v2",
      "  - path_regex: ^v1/",
      "    vault_path: sops-publish-v1/",
      `    vault_kv_mount_name: ${kv1}`,
      "    vault_kv_version: 1",
      "  - path_regex: ^omit/",
      `    s3_bucket: ${s3}`,
      "    s3_prefix: omit/",
      "    omit_extensions: true",
      "  - path_regex: ^nowhere/",
      "",
    ].join("\n"),
  );
});

after(async () => {
  await vault("DELETE", `sys/mounts/${kv1}`);
  h.cleanup();
});

const publish = (tool: Tool, args: string[], input?: string): Promise<RunResult> =>
  h[tool](["publish", ...args], {
    env,
    ...(input === undefined ? {} : { input: new TextEncoder().encode(input) }),
  });

describe("publish side by side with sops 3.13.2", () => {
  test("S3 without a recreation rule: the file's own bytes, at prefix + base name", async () => {
    const file = sopsFile("raw/app.yaml", PLAIN);
    for (const tool of TOOLS) {
      const r = await publish(tool, ["--yes", file]);
      ok(r, `${tool} publish`);
      assert.equal(r.stdout.toString(), "", `${tool} says nothing`);
      assert.equal(await s3Object("raw-app.yaml"), readFileSync(join(h.dir, file), "utf8"), tool);
    }
  });

  test("S3 with a recreation rule: re-encrypted for its keys, the key-group diff printed", async () => {
    const file = sopsFile("s3/app.yaml", PLAIN);
    const stored: Record<string, string> = {};
    const outputs: Record<string, string> = {};
    for (const tool of TOOLS) {
      const r = await publish(tool, ["-y", file]);
      ok(r, `${tool} publish`);
      outputs[tool] = r.stdout.toString();
      stored[tool] = await s3Object("re/app.yaml");
    }
    assert.equal(outputs.bootseal, outputs.sops);
    assert.equal(
      outputs.sops,
      `The following changes will be made to the file's key groups:\nGroup 1\n+++ ${second.recipient}\n--- ${h.ageRecipient}\n`,
    );
    const plains = new Set<string>();
    for (const tool of TOOLS) {
      const text = stored[tool] as string;
      assert.ok(
        text.includes(second.recipient) && !text.includes(h.ageRecipient),
        `${tool}: only the new key`,
      );
      writeFileSync(join(h.dir, `stored-${tool}.yaml`), text);
      // Only the recreation rule's key opens it, and the real sops does.
      const d = await h.sops(["-d", `stored-${tool}.yaml`], { env: { SOPS_AGE_KEY_FILE: second.keyFile } });
      plains.add(ok(d, `sops -d of ${tool}'s upload`).toString());
    }
    assert.equal(plains.size, 1, "both uploads decrypt to the same plaintext");
  });

  test("GCS: the file's own bytes at gcs_prefix + base name; the prompt names gcs://", async () => {
    const file = sopsFile("gcs/app.json", '{"k": "v", "n": [1, 2]}\n');
    for (const tool of TOOLS) {
      const r = await publish(tool, [file], "y\n");
      ok(r, `${tool} publish`);
      assert.equal(
        r.stdout.toString(),
        `uploading ${join(h.dir, file)} to gcs://${gcs}/g/app.json ? (y/n): `,
        `${tool}'s prompt`,
      );
      assert.equal(await gcsObject("g/app.json"), readFileSync(join(h.dir, file), "utf8"), tool);
    }
  });

  for (const version of [2, 1] as const) {
    test(`Vault KV v${version}: the decrypted values as sops sends them (quirks included)`, async () => {
      const file = sopsFile(`v${version}/app.yaml`, PLAIN);
      const path = version === 2 ? "secret/data/sops-publish-v2/app.yaml" : `${kv1}/sops-publish-v1/app.yaml`;
      const data: Record<string, unknown> = {};
      for (const tool of TOOLS) {
        ok(await publish(tool, ["--yes", file]), `${tool} publish`);
        data[tool] = await secret(path, version);
      }
      assert.deepEqual(data.bootseal, data.sops);
      // What sops sends: a mapping inside a list stays Go's raw tree ({Key, Value} pairs).
      assert.deepEqual((data.sops as { c: { d: unknown[] } }).c.d[2], [{ Key: "e", Value: "f" }]);
    });
  }

  test("Vault KV v2: the same data again writes no new version (both tools)", async () => {
    const file = sopsFile("v2/same.yaml", "a: x\nb:\n  c: [y, z]\n");
    const versions: number[] = [];
    for (const tool of [...TOOLS, ...TOOLS]) {
      ok(await publish(tool, ["--yes", file]), `${tool} publish`);
      const meta = (await (await vault("GET", "secret/metadata/sops-publish-v2/same.yaml")).json()) as {
        data: { current_version: number };
      };
      versions.push(meta.data.current_version);
    }
    assert.deepEqual(versions, [1, 1, 1, 1]);
  });

  test("--omit-extensions and the rule's omit_extensions drop the extension", async () => {
    const file = sopsFile("omit/app.yaml", "a: 1\n");
    const raw = sopsFile("raw/omit.yaml", "a: 1\n");
    for (const tool of TOOLS) {
      ok(await publish(tool, ["--yes", file]), `${tool} publish`);
      assert.equal(await s3Object("omit/app"), readFileSync(join(h.dir, file), "utf8"), tool);
      ok(await publish(tool, ["--yes", "--omit-extensions", raw]), `${tool} publish --omit-extensions`);
      assert.equal(await s3Object("raw-omit"), readFileSync(join(h.dir, raw), "utf8"), tool);
    }
  });

  test("--recursive: every file, named by its path below the operand; n skips one and goes on", async () => {
    sopsFile("raw/tree/one.yaml", "a: 1\n");
    sopsFile("raw/tree/sub/two.yaml", "b: 2\n");
    for (const tool of TOOLS) {
      const r = await publish(tool, ["--recursive", "raw/tree"], "n\ny\n");
      ok(r, `${tool} publish --recursive`);
      const one = join(h.dir, "raw/tree/one.yaml");
      const two = join(h.dir, "raw/tree/sub/two.yaml");
      assert.equal(
        r.stdout.toString(),
        `uploading ${one} to s3://${s3}/raw-one.yaml ? (y/n): Publication of ${one} canceled\n` +
          `uploading ${two} to s3://${s3}/raw-sub/two.yaml ? (y/n): `,
        tool,
      );
      assert.equal(await s3Object("raw-sub/two.yaml"), readFileSync(two, "utf8"));
    }
  });

  test("the prompt's answers and failures: sops's texts and exit codes", async () => {
    const file = sopsFile("raw/prompt.yaml", "a: 1\n");
    const cases: [string[], string | undefined, number, RegExp][] = [
      [[file], "n\n", 1, /Publication of .*raw\/prompt\.yaml canceled$/],
      [[file], "", 1, /EOF$/],
      [[file], "\n", 1, /unexpected newline$/],
      [[file], "a b\n", 1, /expected newline$/],
      [["--yes", "raw"], undefined, 1, /can't operate on a directory without --recursive flag\./],
      [["--yes", "missing.yaml"], undefined, 1, /stat missing\.yaml: no such file or directory$/],
      [[], undefined, 100, /Error: no file specified$/],
      [
        ["--yes", sopsFile("other/x.yaml", "a: 1\n")],
        undefined,
        1,
        /no matching destination found in config$/,
      ],
      [
        ["--yes", sopsFile("nowhere/x.yaml", "a: 1\n")],
        undefined,
        1,
        /no destination configured for this file$/,
      ],
    ];
    for (const [args, input, code, message] of cases) {
      for (const tool of TOOLS) {
        const r = await publish(tool, args, input);
        assert.equal(r.status, code, `${tool} publish ${args.join(" ")}: ${r.stderr}`);
        assert.match(r.stderr.toString().trim(), message, `${tool} publish ${args.join(" ")}`);
      }
    }
  });

  test("a file that is not a sops document is refused before anything is sent (both exit 1)", async () => {
    writeFileSync(join(h.dir, "raw/plain.yaml"), "a: 1\n");
    for (const tool of TOOLS) {
      const r = await publish(tool, ["--yes", "raw/plain.yaml"]);
      assert.equal(r.status, 1, `${tool}: ${r.stderr}`);
    }
  });

  test("no .sops.yaml: config file not found, exit 1 in both", async () => {
    for (const tool of TOOLS) {
      const r = await h[tool](["publish", "--yes", "x.yaml"], { cwd: "/", env });
      assert.equal(r.status, 1, tool);
      assert.match(r.stderr.toString(), /config file not found/, tool);
    }
  });
});
