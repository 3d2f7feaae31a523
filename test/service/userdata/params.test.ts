/** Validation of the user-data params, and the quoting helpers. */
import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { describe, test } from "node:test";
import { BootsealError } from "../../../src/errors.ts";
import { psSingleQuoted } from "../../../src/service/userdata/escape.ts";
import { checkParams, renderUserdata, type UserdataParams } from "../../../src/service/userdata/index.ts";
import { systemdEnvValue } from "../../../src/service/userdata/linux-files.ts";
import { ed25519, hostileParams, realisticParams, SHA, tokenOf } from "./fixtures.ts";

const { publicKeyPem } = ed25519();
const good = realisticParams(publicKeyPem);

function withChange(change: (p: UserdataParams) => void): UserdataParams {
  const p = structuredClone(good);
  change(p);
  return p;
}

function assertBadInput(params: UserdataParams, field: RegExp): void {
  for (const format of ["cloud-init", "ignition", "powershell"] as const) {
    assert.throws(
      () => renderUserdata(format, params),
      (err: unknown) => {
        assert.ok(err instanceof BootsealError, String(err));
        assert.equal(err.code, "BAD_INPUT");
        assert.match(err.message, field);
        assert.ok(!err.message.includes(tokenOf(good)), "the message must not hold the token");
        return true;
      },
    );
  }
}

describe("checkParams", () => {
  test("normalises: no trailing slash, lower-case hash, canonical PEM, derived config URL", () => {
    const p = checkParams(
      withChange((x) => {
        x.serviceUrl = "HTTPS://Bootseal.Example.COM:7480/";
      }),
    );
    assert.equal(p.serviceUrl, "https://bootseal.example.com:7480");
    assert.equal(p.configUrl, "https://bootseal.example.com:7480/v1/machines/cluster-a/worker-0/config");
    assert.equal(p.machine, "cluster-a/worker-0");
    assert.equal(p.publicKeyPem, publicKeyPem);
    const upper = checkParams(
      withChange((x) => {
        x.artifact.sha256 = SHA.toUpperCase();
      }),
    );
    assert.equal(upper.artifactSha256, SHA);
    const crlf = checkParams(
      withChange((x) => {
        x.artifact.publicKeyPem = `\r\n${publicKeyPem.replace(/\n/g, "\r\n")}  `;
      }),
    );
    assert.equal(crlf.publicKeyPem, publicKeyPem);
  });

  test("accepts every hostile-looking but valid fixture", () => {
    for (const p of hostileParams(publicKeyPem)) assert.doesNotThrow(() => checkParams(p));
  });

  const cases: [string, (p: UserdataParams) => void, RegExp][] = [
    ["ftp service URL", (p) => (p.serviceUrl = "ftp://x.example"), /serviceUrl/],
    ["file service URL", (p) => (p.serviceUrl = "file:///etc/passwd"), /serviceUrl/],
    ["not a URL", (p) => (p.serviceUrl = "bootseal.example.com"), /serviceUrl/],
    ["credentials in URL", (p) => (p.serviceUrl = "https://u:p@x.example"), /credentials/],
    ["query in service URL", (p) => (p.serviceUrl = "https://x.example/?a=b"), /query/],
    ["fragment in service URL", (p) => (p.serviceUrl = "https://x.example/#a"), /fragment/],
    ["empty fragment in artifact URL", (p) => (p.artifact.url = "https://x.example/a#"), /fragment/],
    ["percent in service URL", (p) => (p.serviceUrl = "https://x.example/%41"), /percent/],
    ["quote in artifact URL", (p) => (p.artifact.url = "https://x.example/a'b"), /artifact\.url/],
    [
      "backslash in artifact URL",
      (p) => (p.artifact.signatureUrl = "https://x.example/a?b\\c"),
      /signatureUrl/,
    ],
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a literal ${X} is the input under test
    ["brace in artifact URL", (p) => (p.artifact.url = "https://x.example/a?${X}"), /artifact\.url/],
    ["upper-case namespace", (p) => (p.machine.namespace = "Kube"), /machine\.namespace/],
    ["dot in name", (p) => (p.machine.name = "a.b"), /machine\.name/],
    ["leading dash in name", (p) => (p.machine.name = "-a"), /machine\.name/],
    ["slash in name", (p) => (p.machine.name = "a/b"), /machine\.name/],
    ["64-char name", (p) => (p.machine.name = "a".repeat(64)), /machine\.name/],
    ["short token", (p) => (p.auth = { method: "token", token: "abc" }), /auth\.token/],
    ["token with space", (p) => (p.auth = { method: "token", token: "abcdefghijklmnop q" }), /auth\.token/],
    ["token with quote", (p) => (p.auth = { method: "token", token: "abcdefghijklmnop'q" }), /auth\.token/],
    [
      "token with newline",
      (p) => (p.auth = { method: "token", token: "abcdefghijklmnop\nq" }),
      /auth\.token/,
    ],
    ["token with $", (p) => (p.auth = { method: "token", token: "abcdefghijklmnop$q" }), /auth\.token/],
    ["63-hex hash", (p) => (p.artifact.sha256 = SHA.slice(1)), /sha256/],
    ["non-hex hash", (p) => (p.artifact.sha256 = `${SHA.slice(1)}g`), /sha256/],
    ["no PEM", (p) => (p.artifact.publicKeyPem = "ssh-ed25519 AAAA"), /publicKeyPem/],
    [
      "private key PEM",
      (p) =>
        (p.artifact.publicKeyPem = String(
          generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "pem" }),
        )),
      /publicKeyPem/,
    ],
    [
      "RSA public key",
      (p) =>
        (p.artifact.publicKeyPem = String(
          generateKeyPairSync("rsa", { modulusLength: 1024 }).publicKey.export({
            type: "spki",
            format: "pem",
          }),
        )),
      /Ed25519/,
    ],
    [
      "PEM with a shell line injected",
      (p) => (p.artifact.publicKeyPem = publicKeyPem.replace("-----END", "$(reboot)\n-----END")),
      /publicKeyPem/,
    ],
  ];
  for (const [name, change, field] of cases) {
    test(`refuses: ${name}`, () => assertBadInput(withChange(change), field));
  }

  test("refuses an unknown format, and a missing machine or artifact", () => {
    assert.throws(
      () => renderUserdata("bash" as "cloud-init", good),
      (e: unknown) => e instanceof BootsealError && e.code === "BAD_INPUT" && /format/.test(e.message),
    );
    assertBadInput({ ...good, machine: undefined } as unknown as UserdataParams, /machine/);
    assertBadInput({ ...good, artifact: null } as unknown as UserdataParams, /artifact/);
  });
});

describe("quoting", () => {
  test("psSingleQuoted doubles ASCII and typographic single quotes, and nothing else", () => {
    assert.equal(psSingleQuoted("a'b"), "'a''b'");
    assert.equal(
      psSingleQuoted("\u2018x\u2019\u201a\u201b"),
      "'\u2018\u2018x\u2019\u2019\u201a\u201a\u201b\u201b'",
    );
    assert.equal(psSingleQuoted('$(Get-Process) `n "x" $env:PATH'), "'$(Get-Process) `n \"x\" $env:PATH'");
    assert.equal(psSingleQuoted(""), "''");
  });

  test("systemdEnvValue refuses what systemd would not take literally", () => {
    assert.equal(systemdEnvValue("https://x/$a;b&c"), "'https://x/$a;b&c'");
    for (const v of ["a'b", "a\nb", "a\\b", "a\u0000b"]) assert.throws(() => systemdEnvValue(v));
  });
});
