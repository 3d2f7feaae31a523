/**
 * `updatekeys --recursive` and `rotate --recursive -i` over a directory tree (issue 31): the
 * documents are made by the real sops from a .sops.yaml rule, bootseal changes them all in one
 * run, and the real sops must then open every one with the new key alone, to the original
 * plaintext. Files without sops metadata and hidden directories are left byte for byte as they
 * were; a broken document fails on its own, the run goes on and exits with its code.
 */
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { EXIT_CODES } from "../../src/cli/exit-codes.ts";
import { createHarness, extraAgeKey, type Harness, ok } from "./harness.ts";

const PLAIN: Record<string, string> = {
  "a.yaml": "token: abc\nnested:\n    list:\n        - x\n        - y\n",
  "b/c.json": '{\n\t"password": "hunter2",\n\t"port": 6443\n}',
  "b/d/e.env": "API_KEY=k1\nOTHER=v\n",
  "b/d/f.yaml": "# a comment\nkey: value\n",
};
/** Not to be touched: no sops metadata, or in a hidden directory. */
const UNTOUCHED = ["README.md", "b/notes.txt", ".git/config.yaml"];

let h: Harness;
after(() => h?.cleanup());
/** The key the runs add: the real sops must open every document with it alone. */
let second: ReturnType<typeof extraAgeKey>;
before(() => {
  h = createHarness();
  second = extraAgeKey(h);
});

const rule = (recipients: string[]) => `creation_rules:\n  - age: ${recipients.join(",")}\n`;

interface Project {
  readonly dir: string;
  /** Every file under tree/ as it was made. */
  readonly originals: Map<string, Buffer>;
  /** What the real sops decrypted each document to before the run. */
  readonly decrypted: Map<string, string>;
}

/** A project directory: .sops.yaml, the documents encrypted by sops under `tree/`, the others. */
async function project(name: string): Promise<Project> {
  const dir = join(h.dir, name);
  mkdirSync(dir);
  writeFileSync(join(dir, ".sops.yaml"), rule([h.ageRecipient]));
  for (const [path, text] of Object.entries(PLAIN)) {
    const plain = join(dir, "plain", path);
    mkdirSync(dirname(plain), { recursive: true });
    writeFileSync(plain, text);
    const enc = ok(await h.sops(["encrypt", plain], { cwd: dir }), `sops encrypt ${path}`);
    mkdirSync(dirname(join(dir, "tree", path)), { recursive: true });
    writeFileSync(join(dir, "tree", path), enc);
  }
  // A sops document in a hidden directory: not entered.
  mkdirSync(join(dir, "tree", ".git"), { recursive: true });
  writeFileSync(join(dir, "tree", ".git/config.yaml"), readFileSync(join(dir, "tree", "a.yaml")));
  writeFileSync(join(dir, "tree", "README.md"), "# docs, no secrets\n");
  writeFileSync(join(dir, "tree", "b/notes.txt"), "plain text\n");
  const originals = new Map<string, Buffer>();
  for (const path of [...Object.keys(PLAIN), ...UNTOUCHED])
    originals.set(path, readFileSync(join(dir, "tree", path)));
  const decrypted = new Map<string, string>();
  for (const path of Object.keys(PLAIN))
    decrypted.set(path, ok(await h.sops(["decrypt", join("tree", path)], { cwd: dir }), path).toString());
  return { dir, originals, decrypted };
}

/** The real sops opens every document with the second key only, to what it decrypted before. */
async function sopsOpensAllWithSecondKey({ dir, decrypted }: Project): Promise<void> {
  for (const [path, text] of decrypted) {
    const out = ok(
      await h.sops(["decrypt", join("tree", path)], { cwd: dir, env: { SOPS_AGE_KEY_FILE: second.keyFile } }),
      `sops decrypt ${path} with the second key`,
    );
    assert.equal(out.toString(), text, path);
  }
}

function untouched(dir: string, originals: Map<string, Buffer>): void {
  for (const path of UNTOUCHED)
    assert.deepEqual(readFileSync(join(dir, "tree", path)), originals.get(path), path);
}

test("updatekeys --recursive: every document under the directory gets the rule's new key, in one run", async () => {
  const p = await project("updatekeys");
  const { dir, originals } = p;
  writeFileSync(join(dir, ".sops.yaml"), rule([h.ageRecipient, second.recipient]));
  const r = await h.bootseal(["updatekeys", "--recursive", "-y", "tree"], { cwd: dir });
  assert.equal(r.status, 0, r.stderr);
  assert.match(
    r.stderr,
    /^updatekeys: 6 files in [\d.]+ s: 4 updated, 0 already up to date, 2 skipped, 0 failed$/m,
  );
  assert.match(r.stderr, /^tree\/README\.md: skipped \(not a sops document\)$/m);
  assert.match(r.stderr, /^tree\/b\/d\/e\.env: updated$/m);
  assert.doesNotMatch(r.stderr, /\.git/);
  // The diff sops prints, once per document.
  assert.equal(r.stdout.toString().match(/^\+\+\+ age1/gm)?.length, 4);
  await sopsOpensAllWithSecondKey(p);
  untouched(dir, originals);

  const again = await h.bootseal(["updatekeys", "--recursive", "-y", "tree"], { cwd: dir });
  assert.equal(again.status, 0, again.stderr);
  assert.match(again.stderr, /: 0 updated, 4 already up to date, 2 skipped, 0 failed$/m);
});

test("rotate --recursive -i: new data keys and the added key for every document; -i is required", async () => {
  const p = await project("rotate");
  const { dir, originals } = p;
  const refused = await h.bootseal(["rotate", "--recursive", "tree"], { cwd: dir });
  assert.equal(refused.status, EXIT_CODES.USAGE, refused.stderr);
  assert.match(refused.stderr, /give -i/);

  const r = await h.bootseal(["rotate", "--recursive", "-i", "--add-age", second.recipient, "tree"], {
    cwd: dir,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stderr, /^rotate: 6 files in [\d.]+ s: 4 rotated, 0 unchanged, 2 skipped, 0 failed$/m);
  for (const path of Object.keys(PLAIN)) {
    const after = readFileSync(join(dir, "tree", path), "utf8");
    assert.notEqual(after, originals.get(path)?.toString(), `${path} was rewritten`);
    assert.ok(after.includes(second.recipient), `${path} lists the added key`);
  }
  await sopsOpensAllWithSecondKey(p);
  untouched(dir, originals);
});

test("a broken document fails alone: the others are done, the exit code is its failure's", async () => {
  const { dir } = await project("broken");
  const broken = readFileSync(join(dir, "tree", "a.yaml"), "utf8").replace(
    /mac: ENC\[[^\]]*\]/,
    "mac: ENC[x]",
  );
  writeFileSync(join(dir, "tree", "a.yaml"), broken);
  const r = await h.bootseal(["rotate", "--recursive", "-i", "--add-age", second.recipient, "tree"], {
    cwd: dir,
  });
  assert.match(r.stderr, /^tree\/a\.yaml: failed: /m);
  assert.match(r.stderr, /: 3 rotated, 0 unchanged, 2 skipped, 1 failed$/m);
  assert.notEqual(r.status, 0);
  assert.equal(
    readFileSync(join(dir, "tree", "a.yaml"), "utf8"),
    broken,
    "the broken file is left as it was",
  );
  const single = await h.bootseal(["rotate", "-i", "--add-age", second.recipient, "tree/a.yaml"], {
    cwd: dir,
  });
  assert.equal(r.status, single.status, "the same exit code as rotating that file alone");
});
