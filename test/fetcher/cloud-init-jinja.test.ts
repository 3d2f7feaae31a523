/**
 * The `## template: jinja` renderer's own rules, without cloud-init: which instance-data file
 * it reads under --root, and the refusal, by name, of every Jinja construct that is not a plain
 * variable. What it renders is compared with cloud-init 22.4.2 itself in
 * cloud-init-jinja-differential.test.ts.
 */
import assert from "node:assert/strict";
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { test } from "node:test";
import { isBootsealError } from "../../src/errors.ts";
import { renderJinjaUserData } from "../../src/fetcher/payloads/cloud-init-jinja.ts";
import { tempDir } from "./helpers.ts";

const DATA = {
  ds: { meta_data: { "local-hostname": "ip-10-0-0-7" } },
  v1: { instance_id: "i-1" },
};

async function render(
  template: string,
  files: Record<string, string> = { "instance-data-sensitive.json": JSON.stringify(DATA) },
): Promise<string> {
  const dir = await tempDir("jinja");
  try {
    await mkdir(join(dir.path, "run/cloud-init"), { recursive: true });
    for (const [name, text] of Object.entries(files))
      await writeFile(join(dir.path, "run/cloud-init", name), text);
    const out = await renderJinjaUserData(new TextEncoder().encode(template), dir.path, () => {});
    return new TextDecoder().decode(out);
  } finally {
    await dir.remove();
  }
}

async function refused(template: string, message: RegExp): Promise<void> {
  await assert.rejects(render(template), (err: unknown) => {
    assert.ok(isBootsealError(err), String(err));
    assert.equal(err.code, "BAD_INPUT");
    assert.match(err.message, message);
    assert.doesNotMatch(err.message, /SECRET/, "no payload text but variable names in the message");
    return true;
  });
}

const H = "## template: jinja\n#cloud-config\n";

test("the sensitive instance data is read first, the redacted one when it is missing", async () => {
  const redacted = JSON.stringify({ v1: { instance_id: "redacted-copy" } });
  assert.equal(
    await render(`${H}a: {{ v1.instance_id }}\n`, {
      "instance-data-sensitive.json": JSON.stringify(DATA),
      "instance-data.json": redacted,
    }),
    "#cloud-config\na: i-1\n",
  );
  assert.equal(
    await render(`${H}a: {{ v1.instance_id }}\n`, { "instance-data.json": redacted }),
    "#cloud-config\na: redacted-copy\n",
  );
});

test("a template without variables needs no instance data; a payload without the header is untouched", async () => {
  assert.equal(await render(`${H}a: 1\r\nb: 2\r\n`, {}), "#cloud-config\na: 1\nb: 2\n");
  assert.equal(await render("#cloud-config\na: '{{ x }}'\n", {}), "#cloud-config\na: '{{ x }}'\n");
});

test("instance data that is not a JSON object is refused", async () => {
  for (const text of ["{", "[1]", "NaN"]) {
    await assert.rejects(
      render(`${H}a: {{ x }}\n`, { "instance-data-sensitive.json": text }),
      /BAD_INPUT|instance data .* is not (JSON|a JSON object)/,
    );
  }
});

test("every Jinja construct other than a plain variable is refused by name", async () => {
  const cases: [string, RegExp][] = [
    ["{% if SECRET %}x{% endif %}", /a statement \(\{% %\}\)/],
    ["{# SECRET #}", /a comment \(\{# #\}\)/],
    ["{{ SECRET | upper }}", /a filter \(\|\)/],
    ["{{ SECRET[0] }}", /a subscript/],
    ["{{ SECRET() }}", /a call/],
    ["{{ 'SECRET' }}", /a string literal/],
    ["{{ 1 }}", /a number or list index/],
    ["{{ v1.0 }}", /a number or list index/],
    ["{{ v1 + SECRET }}", /an expression/],
    ["{{- v1 }}", /whitespace control/],
    ["{{ v1 -}}", /whitespace control/],
    ["{{ v1 ", /an unclosed \{\{/],
    ["{{ }}", /an empty \{\{ \}\}/],
    ["{{ é }}", /outside \[A-Za-z0-9_\]/],
    ["{{ true }}", /`true` is a Jinja keyword/],
    ["{{ self }}", /`self` is a Jinja keyword/],
    ["{{ range }}", /`range` is a Jinja global/],
    ["{{ ds.items }}", /`\.items` is a Python attribute of a dict/],
    ["{{ ds.meta_data.local_hostname.upper }}", /`\.upper` is a Python attribute of a str/],
    ["{{ ds.__class__ }}", /`\.__class__` is a Python attribute/],
    ["{{ nowhere.there }}", /`nowhere` is undefined, so cloud-init 22\.4 renders nothing/],
    ["{{ ds }}", /\{\{ ds \}\} is a dict/],
  ];
  for (const [body, message] of cases) await refused(`${H}a: ${body}\n`, message);
});

test("a header cloud-init would not render, or a rendering that is not a cloud-config, is refused", async () => {
  await refused(` ${H}a: {{ v1 }}\n`, /first line must be exactly/);
  await refused(`## template: jinja2\n#cloud-config\n`, /first line must be exactly/);
  await refused("## template: jinja\n{{ v1.instance_id }}\n", /not a #cloud-config/);
});
