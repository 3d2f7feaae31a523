/**
 * set, unset, filestatus, edit (and the bare FILE form), groups and the legacy -d/-e/-r/--set
 * forms side by side with the real sops 3.13.2: the same input and keys go to both, and the
 * results must agree: the decrypted documents, the metadata (all but lastmodified and the MAC
 * where values changed; created_at of kept keys), and success or failure. The editor is a
 * scripted shell program that edits the temporary file deterministically.
 *
 * Exit numbers: where sops and bootseal share the number today it is compared directly; where
 * they differ (sops 7 "invalid set format", 1 "generic", 200 "file has not changed") bootseal's
 * code is asserted through EXIT_CODES and the sops number is named, so a renumbering shows here.
 */
import assert from "node:assert/strict";
import { chmodSync, existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { KEY_KINDS } from "../../providers/keys/index.ts";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { loadEncrypted } from "../../src/envelope/document.ts";
import type { Format } from "../../src/envelope/sops/codecs/codec.ts";
import { createHarness, type Harness, ok } from "./harness.ts";

let h: Harness;
let file: (name: string) => string;

before(() => {
  h = createHarness();
  file = (name) => join(h.dir, name);
  const script = (name: string, body: string) => {
    writeFileSync(file(name), `#!/bin/sh\n${body}\n`);
    chmodSync(file(name), 0o755);
  };
  // Appends one key; records the temporary file's and directory's modes.
  script(
    "append.sh",
    `echo "$(stat -c %a "$1") $(stat -c %a "$(dirname "$1")")" >> "$MODES"\nprintf 'added: by the editor\\n' >> "$1"`,
  );
  script("noop.sh", "exit 0");
  // Invalid YAML the first time, a valid document the second (sops then waits for a key
  // press: its standard input is at its end, so it goes straight back to the editor).
  script(
    "fix-on-second.sh",
    `n=$(cat "$COUNTER" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$COUNTER"\nif [ $n -eq 1 ]; then printf 'a: [\\n' > "$1"; else printf 'fixed: yes\\n' > "$1"; fi`,
  );
  // Keeps a copy of what the tool put in the temporary file, then changes it harmlessly.
  script("capture.sh", `cp "$1" "$CAPTURE"\nprintf '\\n\\n' >> "$1"`);
});
after(() => h?.cleanup());

const PLAIN_YAML = "a: 1\nb:\n    - x\n    - w\nc:\n    d: e\nkeep_unencrypted: visible\n";

/** One sops-encrypted original, copied for each tool. */
async function pair(
  name: string,
  plain = PLAIN_YAML,
  ext = "yaml",
): Promise<{ s: string; b: string; original: Buffer }> {
  writeFileSync(file(`${name}.plain.${ext}`), plain);
  const original = ok(
    await h.sops(["encrypt", "--age", h.ageRecipient, file(`${name}.plain.${ext}`)]),
    "sops encrypt",
  );
  const s = file(`${name}.sops.${ext}`);
  const b = file(`${name}.bootseal.${ext}`);
  writeFileSync(s, original);
  writeFileSync(b, original);
  return { s, b, original };
}

function formatOf(path: string): Format {
  return path.endsWith(".json") ? "json" : path.endsWith(".env") ? "dotenv" : "yaml";
}

/** The metadata as comparable data; `volatile` leaves out what a re-encryption renews. */
function metadataOf(path: string, volatile = false): unknown {
  const { metadata } = loadEncrypted(readFileSync(path), formatOf(path), KEY_KINDS);
  const groups = metadata.keyGroups.map((g) =>
    g.map((e) => ({ kind: e.kind, enc: e.enc, fields: [...e.fields] })),
  );
  const { lastModified, mac, ...rest } = metadata;
  return volatile ? { ...rest, keyGroups: groups } : { ...rest, keyGroups: groups, lastModified, mac };
}

async function decrypted(path: string, env?: NodeJS.ProcessEnv): Promise<string> {
  return ok(await h.sops(["decrypt", path], { env }), `sops decrypt ${path}`).toString();
}

describe("set and unset, side by side", { timeout: 600_000 }, () => {
  test("a sequence of sets: same documents, same successes, failures leave both files as they were", async () => {
    const { s, b, original } = await pair("set");
    const steps: { path: string; value: string; ok: boolean }[] = [
      { path: `["c"]["d"]`, value: `"changed"`, ok: true },
      { path: `["new"]`, value: `{"x": 1.5, "y": [true, null], "z": 3}`, ok: true },
      { path: `["b"][5]`, value: `"appended"`, ok: true },
      { path: `["b"][0]`, value: "7", ok: true },
      { path: `['quoted']`, value: "false", ok: true },
      { path: `["deep"]["er"][0]`, value: `"made"`, ok: true },
      { path: `["a"]["through"]`, value: `"scalar replaced"`, ok: true },
      { path: `["keep_unencrypted"]`, value: `"still plain"`, ok: true },
      // sops: exit 7 (ErrorInvalidSetFormat) for each of these.
      { path: `["top"]`, value: "[1, 2]", ok: false },
      { path: `["bad"]`, value: "{not json", ok: false },
      { path: `x["a"]`, value: "1", ok: false },
    ];
    for (const step of steps) {
      const beforeS = readFileSync(s);
      const beforeB = readFileSync(b);
      const rs = await h.sops(["set", s, step.path, step.value]);
      const rb = await h.bootseal(["set", b, step.path, step.value]);
      const what = `set ${step.path} ${step.value}: sops ${rs.status} ${rs.stderr.trim()} / bootseal ${rb.status} ${rb.stderr.trim()}`;
      if (step.ok) {
        assert.equal(rs.status, 0, what);
        assert.equal(rb.status, 0, what);
      } else {
        assert.equal(rs.status, 7, what);
        assert.equal(rb.status, EXIT_CODES.BAD_SET_VALUE, what);
        assert.deepEqual(readFileSync(s), beforeS);
        assert.deepEqual(readFileSync(b), beforeB);
      }
      assert.equal(await decrypted(b), await decrypted(s), what);
    }
    // bootseal reads its own result the same way.
    assert.equal(ok(await h.bootseal(["decrypt", b]), "bootseal decrypt").toString(), await decrypted(s));
    // Same data key, same key groups: only lastmodified and the MAC are new.
    assert.deepEqual(metadataOf(b, true), metadataOf(s, true));
    writeFileSync(file("set.original.yaml"), original);
    assert.deepEqual(metadataOf(b, true), metadataOf(file("set.original.yaml"), true));
    assert.notDeepEqual(metadataOf(b), metadataOf(file("set.original.yaml")));
  });

  test("a JSON document, --value-file, --value-stdin and --idempotent", async () => {
    const { s, b } = await pair("setjson", `{"a": {"b": 1}, "list": [1, 2]}`, "json");
    writeFileSync(file("value.json"), `{"from": "file"}`);
    for (const tool of ["sops", "bootseal"] as const) {
      const run = h[tool];
      const target = tool === "sops" ? s : b;
      ok(
        await run(["set", "--value-file", target, `["a"]["f"]`, file("value.json")]),
        `${tool} --value-file`,
      );
      ok(
        await run(["set", "--value-stdin", target, `["list"][1]`], { input: Buffer.from(`"from stdin"`) }),
        `${tool} --value-stdin`,
      );
      const before = readFileSync(target);
      ok(await run(["set", "--idempotent", target, `["a"]["b"]`, "1"]), `${tool} --idempotent`);
      // The JSON store reads 1 inside a document as an integer, the value 1 as a float: not
      // equal to Go's ==, so sops writes; a string equal to the current value is a no-op.
      ok(
        await run(["set", "--idempotent", target, `["list"][1]`, `"from stdin"`]),
        `${tool} --idempotent same`,
      );
      assert.notDeepEqual(readFileSync(target), before, `${tool}: the int/float change was written`);
      const settled = readFileSync(target);
      ok(
        await run(["set", "--idempotent", target, `["list"][1]`, `"from stdin"`]),
        `${tool} --idempotent again`,
      );
      assert.deepEqual(readFileSync(target), settled, `${tool}: an unchanged value leaves the file alone`);
      const both = await run(["set", "--value-file", "--value-stdin", target, `["a"]`]);
      assert.notEqual(both.status, 0, `${tool} refuses --value-file with --value-stdin`);
    }
    assert.equal(await decrypted(b), await decrypted(s));
  });

  test("unset: removals agree; a missing key fails unless --idempotent, which leaves the file alone", async () => {
    const { s, b } = await pair("unset");
    for (const path of [`["c"]["d"]`, `["b"][0]`, `["keep_unencrypted"]`]) {
      ok(await h.sops(["unset", s, path]), `sops unset ${path}`);
      ok(await h.bootseal(["unset", b, path]), `bootseal unset ${path}`);
      assert.equal(await decrypted(b), await decrypted(s), path);
    }
    assert.deepEqual(metadataOf(b, true), metadataOf(s, true));
    const settledS = readFileSync(s);
    const settledB = readFileSync(b);
    for (const path of [`["zz"]`, `["b"][7]`]) {
      const rs = await h.sops(["unset", s, path]);
      const rb = await h.bootseal(["unset", b, path]);
      assert.equal(rs.status, 1, `sops unset ${path}: generic error`);
      assert.equal(rb.status, EXIT_CODES.BAD_INPUT, `bootseal unset ${path}: ${rb.stderr}`);
      assert.equal((await h.sops(["unset", "--idempotent", s, path])).status, 0);
      assert.equal((await h.bootseal(["unset", "--idempotent", b, path])).status, 0);
    }
    // A path through a scalar is no "missing key": --idempotent does not forgive it in either.
    assert.notEqual((await h.sops(["unset", "--idempotent", s, `["a"]["x"]`])).status, 0);
    assert.equal((await h.bootseal(["unset", "--idempotent", b, `["a"]["x"]`])).status, EXIT_CODES.BAD_INPUT);
    assert.deepEqual(readFileSync(s), settledS);
    assert.deepEqual(readFileSync(b), settledB);
  });
});

describe("filestatus, side by side", { timeout: 600_000 }, () => {
  test("the same JSON line for encrypted and plain files; both fail on unreadable ones", async () => {
    const { s } = await pair("status");
    writeFileSync(file("plain.yaml"), PLAIN_YAML);
    writeFileSync(file("plain.json"), `{"a": 1}`);
    writeFileSync(file("plain.env"), "A=1\n");
    writeFileSync(file("broken.yaml"), "a: [\n");
    for (const target of [s, file("plain.yaml"), file("plain.json"), file("plain.env")]) {
      const rs = await h.sops(["filestatus", target]);
      const rb = await h.bootseal(["filestatus", target]);
      assert.equal(rs.status, 0);
      assert.equal(rb.status, 0, rb.stderr);
      assert.equal(rb.stdout.toString(), rs.stdout.toString(), target);
    }
    assert.equal((await h.bootseal(["filestatus", s])).stdout.toString(), `{"encrypted":true}\n`);
    for (const target of [file("broken.yaml"), file("missing.yaml")]) {
      assert.notEqual((await h.sops(["filestatus", target])).status, 0, target);
      assert.notEqual((await h.bootseal(["filestatus", target])).status, 0, target);
    }
  });
});

describe("edit with a scripted editor, side by side", { timeout: 600_000 }, () => {
  const editorEnv = (editor: string, extra: Record<string, string> = {}) => ({
    EDITOR: file(editor),
    ...extra,
  });

  test("a change is re-encrypted under the same keys; the temporary file is 0600 in a 0700 directory", async () => {
    const { s, b, original } = await pair("edit");
    const modes = file("edit.modes");
    // SOPS_EDITOR wins over EDITOR, and is split like a shell command line.
    const env = { SOPS_EDITOR: `sh '${file("append.sh")}'`, EDITOR: file("noop.sh"), MODES: modes };
    assert.equal((await h.sops(["edit", s], { env })).status, 0);
    assert.equal((await h.bootseal(["edit", b], { env })).status, 0);
    assert.equal(await decrypted(b), await decrypted(s));
    assert.match(await decrypted(b), /added: by the editor/);
    assert.deepEqual(metadataOf(b, true), metadataOf(s, true));
    writeFileSync(file("edit.original.yaml"), original);
    assert.deepEqual(metadataOf(b, true), metadataOf(file("edit.original.yaml"), true));
    assert.deepEqual(readFileSync(modes, "utf8").trim().split("\n"), ["600 700", "600 700"]);
  });

  test("unchanged content: nothing is written (sops exits 200)", async () => {
    const { s, b, original } = await pair("noop");
    const rs = await h.sops(["edit", s], { env: editorEnv("noop.sh") });
    const rb = await h.bootseal(["edit", b], { env: editorEnv("noop.sh") });
    assert.equal(rs.status, 200);
    assert.equal(rb.status, EXIT_CODES.NOT_MODIFIED, rb.stderr);
    assert.match(rb.stderr, /File has not changed/);
    assert.deepEqual(readFileSync(s), original);
    assert.deepEqual(readFileSync(b), original);
  });

  test("invalid content sends the user back to the editor; the second, valid edit is saved", async () => {
    const { s, b } = await pair("invalid");
    const rs = await h.sops(["edit", s], {
      env: editorEnv("fix-on-second.sh", { COUNTER: file("count.sops") }),
    });
    const rb = await h.bootseal(["edit", b], {
      env: editorEnv("fix-on-second.sh", { COUNTER: file("count.bs") }),
    });
    assert.equal(rs.status, 0, rs.stderr);
    assert.equal(rb.status, 0, rb.stderr);
    assert.match(rb.stderr, /Could not load tree, probably due to invalid syntax/);
    assert.equal(readFileSync(file("count.bs"), "utf8").trim(), "2");
    assert.equal(readFileSync(file("count.sops"), "utf8").trim(), "2");
    assert.equal(await decrypted(b), await decrypted(s));
  });

  test("--ignore-mac: a document with a bad MAC is refused, and edited with the flag", async () => {
    const { s, b } = await pair("mac");
    for (const target of [s, b]) {
      const text = readFileSync(target, "utf8").replace(
        /mac: ENC\[AES256_GCM,data:(.)/,
        (_, c: string) => `mac: ENC[AES256_GCM,data:${c === "A" ? "B" : "A"}`,
      );
      writeFileSync(target, text);
    }
    const env = editorEnv("append.sh", { MODES: file("mac.modes") });
    const rs = await h.sops(["edit", s], { env });
    const rb = await h.bootseal(["edit", b], { env });
    assert.notEqual(rs.status, 0);
    assert.notEqual(rb.status, 0);
    assert.equal((await h.sops(["edit", "--ignore-mac", s], { env })).status, 0);
    assert.equal((await h.bootseal(["edit", "--ignore-mac", b], { env })).status, 0);
    assert.equal(await decrypted(b), await decrypted(s));
  });

  test("--show-master-keys and the bare FILE form: the same temporary file as sops", async () => {
    const { s, b } = await pair("show");
    ok(
      await h.sops(["edit", "--show-master-keys", s], {
        env: editorEnv("capture.sh", { CAPTURE: file("cap.sops") }),
      }),
      "sops -s",
    );
    ok(
      await h.bootseal(["-s", b], { env: editorEnv("capture.sh", { CAPTURE: file("cap.bs") }) }),
      "bootseal -s FILE",
    );
    assert.equal(readFileSync(file("cap.bs"), "utf8"), readFileSync(file("cap.sops"), "utf8"));
    assert.match(readFileSync(file("cap.bs"), "utf8"), /^sops:$/m);
    assert.equal(await decrypted(b), await decrypted(s));
  });

  test("a new file under a .sops.yaml rule: the rule's key groups, threshold and selection, as sops", async () => {
    const { mkdirSync } = await import("node:fs");
    const rules = file("rules");
    mkdirSync(rules, { recursive: true });
    writeFileSync(
      join(rules, ".sops.yaml"),
      `creation_rules:\n  - path_regex: \\.yaml$\n    encrypted_regex: '^(hello|example_key)$'\n    key_groups:\n      - age: [${h.ageRecipient}]\n      - age: [${h.ageRecipient}]\n`,
    );
    const env = editorEnv("capture.sh", { CAPTURE: file("rules.capture") });
    ok(await h.sops(["edit", "n-sops.yaml"], { cwd: rules, env }), "sops edit under a rule");
    ok(await h.bootseal(["edit", "n-bootseal.yaml"], { cwd: rules, env }), "bootseal edit under a rule");
    const shape = (name: string) => {
      const { metadata } = loadEncrypted(readFileSync(join(rules, name)), "yaml", KEY_KINDS);
      return {
        rule: metadata.rule,
        threshold: metadata.shamirThreshold,
        version: metadata.version,
        groups: metadata.keyGroups.map((g) => g.map((e) => [e.kind, e.fields.get("recipient")])),
      };
    };
    assert.deepEqual(shape("n-bootseal.yaml"), shape("n-sops.yaml"));
    assert.equal(
      await decrypted(join(rules, "n-bootseal.yaml")),
      await decrypted(join(rules, "n-sops.yaml")),
    );
    // Only the selected keys are encrypted, in both.
    const plainKeys = (name: string) =>
      readFileSync(join(rules, name), "utf8")
        .split("\n")
        .filter((l) => /^[a-z_]+: /.test(l) && !l.includes("ENC["))
        .map((l) => l.split(":")[0]);
    assert.deepEqual(plainKeys("n-bootseal.yaml"), plainKeys("n-sops.yaml"));
  });

  for (const ext of ["yaml", "json", "env", "ini", "bin"]) {
    test(`a new .${ext} file starts from sops's example and is encrypted for the key flags`, async () => {
      const sNew = file(`new-sops.${ext}`);
      const bNew = file(`new-bootseal.${ext}`);
      rmSync(sNew, { force: true });
      rmSync(bNew, { force: true });
      const args = (target: string) => ["edit", "--age", h.ageRecipient, target];
      ok(
        await h.sops(args(sNew), { env: editorEnv("capture.sh", { CAPTURE: file(`ex.sops.${ext}`) }) }),
        "sops new",
      );
      ok(
        await h.bootseal(args(bNew), { env: editorEnv("capture.sh", { CAPTURE: file(`ex.bs.${ext}`) }) }),
        "bootseal new",
      );
      assert.equal(readFileSync(file(`ex.bs.${ext}`), "utf8"), readFileSync(file(`ex.sops.${ext}`), "utf8"));
      assert.ok(existsSync(bNew));
      const input = ext === "bin" ? ["--input-type", "binary", "--output-type", "binary"] : [];
      const open = async (target: string) =>
        ok(await h.sops(["decrypt", ...input, target]), `decrypt ${target}`).toString();
      assert.equal(await open(bNew), await open(sNew));
    });
  }
});

describe("groups add and delete, side by side", { timeout: 600_000 }, () => {
  /** Kinds and identities per group, without the wrapped keys (they are random). */
  function shape(path: string): unknown {
    const { metadata } = loadEncrypted(readFileSync(path), "yaml", KEY_KINDS);
    return {
      threshold: metadata.shamirThreshold,
      groups: metadata.keyGroups.map((g) => g.map((e) => [e.kind, e.fields.get("recipient")])),
      lastModified: metadata.lastModified,
      mac: metadata.mac,
    };
  }

  test("add two groups (threshold 2), delete one: the same shape as sops, every result opens with sops", async () => {
    const { s, b } = await pair("groups");
    const second = file("age2.txt");
    const third = file("age3.txt");
    const recipient = async (keyFile: string) => {
      rmSync(keyFile, { force: true });
      const { execFileSync } = await import("node:child_process");
      const { peer } = await import("../helpers/peers.ts");
      execFileSync(peer("AGE_KEYGEN_BIN"), ["-o", keyFile], { stdio: "ignore" });
      return /public key: (age1\w+)/.exec(readFileSync(keyFile, "utf8"))?.[1] as string;
    };
    const r2 = await recipient(second);
    const r3 = await recipient(third);
    const all = file("all-ages.txt");
    writeFileSync(all, [h.ageKeyFile, second, third].map((f) => readFileSync(f, "utf8")).join(""));
    const env = { SOPS_AGE_KEY_FILE: all };
    const createdAt = (path: string) =>
      loadEncrypted(readFileSync(path), "yaml", KEY_KINDS).metadata.keyGroups[0]?.[0]?.fields.get(
        "created_at",
      );
    const originalCreatedAt = createdAt(s);

    for (const [tool, target] of [
      ["sops", s],
      ["bootseal", b],
    ] as const) {
      const run = h[tool];
      ok(await run(["groups", "add", "--file", target, "-i", "--age", r2], { env }), `${tool} groups add`);
      ok(
        await run(
          [
            "groups",
            "add",
            "--file",
            target,
            "--in-place",
            "--age",
            r3,
            "--shamir-secret-sharing-threshold",
            "2",
          ],
          { env },
        ),
        `${tool} groups add 2`,
      );
    }
    assert.deepEqual(shape(b), shape(s));
    assert.equal(createdAt(b), originalCreatedAt, "the first key keeps its created_at");
    // Threshold 2 of 3: two identities open it, one does not.
    writeFileSync(file("two.txt"), [second, third].map((f) => readFileSync(f, "utf8")).join(""));
    assert.equal(
      ok(
        await h.sops(["decrypt", b], { env: { SOPS_AGE_KEY_FILE: file("two.txt") } }),
        "two groups",
      ).toString(),
      PLAIN_YAML,
    );
    assert.notEqual((await h.sops(["decrypt", b], { env: { SOPS_AGE_KEY_FILE: second } })).status, 0);

    // delete prints to standard output without -i, like sops.
    const ds = await h.sops(["groups", "delete", "--file", s, "0"], { env });
    const db = await h.bootseal(["groups", "delete", "--file", b, "0"], { env });
    assert.equal(ds.status, 0);
    assert.equal(db.status, 0, db.stderr);
    writeFileSync(file("deleted.sops.yaml"), ds.stdout);
    writeFileSync(file("deleted.bootseal.yaml"), db.stdout);
    assert.deepEqual(shape(file("deleted.bootseal.yaml")), shape(file("deleted.sops.yaml")));
    assert.equal(await decrypted(file("deleted.bootseal.yaml"), env), PLAIN_YAML);

    // Two groups left with threshold 2: deleting another is refused by both (sops: exit 1).
    const third1 = await h.sops(["groups", "delete", "--file", file("deleted.sops.yaml"), "0"], { env });
    const third2 = await h.bootseal(["groups", "delete", "--file", file("deleted.bootseal.yaml"), "0"], {
      env,
    });
    assert.equal(third1.status, 1);
    assert.equal(third2.status, EXIT_CODES.USAGE);
    assert.match(third2.stderr, /Shamir threshold is 2, but we only have 1 key groups/);
  });
});

describe("the legacy top-level forms, side by side", { timeout: 600_000 }, () => {
  test("-d, -e, -r -i, --set and --output mean what they mean in sops", async () => {
    const { s, b } = await pair("legacy");
    assert.deepEqual(ok(await h.bootseal(["-d", b]), "bootseal -d"), ok(await h.sops(["-d", s]), "sops -d"));
    const extract = ["-d", "--extract", `["c"]["d"]`];
    assert.deepEqual(
      ok(await h.bootseal([...extract, b]), "bootseal -d --extract"),
      ok(await h.sops([...extract, s]), "sops"),
    );
    ok(await h.bootseal(["-d", "--output", file("legacy.out.yaml"), b]), "bootseal -d --output");
    assert.equal(readFileSync(file("legacy.out.yaml"), "utf8"), PLAIN_YAML);

    ok(await h.sops(["--set", `["c"]["d"] "via --set"`, s]), "sops --set");
    ok(await h.bootseal(["--set", `["c"]["d"] "via --set"`, b]), "bootseal --set");
    assert.equal(await decrypted(b), await decrypted(s));

    ok(await h.bootseal(["-r", "-i", b]), "bootseal -r -i");
    assert.equal(await decrypted(b), await decrypted(s));

    const encrypted = ok(
      await h.bootseal(["-e", "--age", h.ageRecipient, file("legacy.plain.yaml")]),
      "bootseal -e",
    );
    writeFileSync(file("legacy.e.yaml"), encrypted);
    assert.equal(await decrypted(file("legacy.e.yaml")), PLAIN_YAML);

    const verbose = await h.bootseal(["--verbose", "set", b, `["a"]`, `"v"`]);
    assert.equal(verbose.status, 0);
    assert.match(verbose.stderr, /File written successfully/);
    assert.equal((await h.bootseal(["-d", "-e", b])).status, EXIT_CODES.USAGE);
  });
});
