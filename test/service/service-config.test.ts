import assert from "node:assert/strict";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import { configTable, DOC_PATH, withTable } from "../../scripts/config-docs.ts";
import {
  applyEnv,
  ENV_KEYS,
  envName,
  readServiceConfigFile,
  validateServiceConfig,
} from "../../src/config/service-config.ts";
import { configLeaves, schemaDefault } from "../../src/config/service-config-schema.ts";
import { parseDuration } from "../../src/duration.ts";

const dir = mkdtempSync(join(tmpdir(), "bootseal-config-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const RECIPIENT = "age1ql3z7hjy54pw3hyww5ayyfg7zqgvc7w3j2elw8zmrj2kg5sfn9aqmcac8p";
const HASH = "a".repeat(64);
const minimal = () => ({
  store: "file://./store",
  creation_rules: [{ age: RECIPIENT }],
  controllers: [{ name: "ci", tokenSha256: HASH, scopes: ["configs:write"] }],
});

const PEM = String(generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "pem" }));
const LINUX_SHA = "1".repeat(64);
const WINDOWS_SHA = "2".repeat(64);
const linuxArtifact = () => ({
  url: "https://dl.example.com/bootseal-linux-amd64",
  sha256: LINUX_SHA,
  signatureUrl: "https://dl.example.com/bootseal-linux-amd64.sig",
  publicKeyPem: PEM,
});
const windowsArtifact = () => ({
  url: "https://dl.example.com/bootseal-windows-amd64.exe",
  sha256: WINDOWS_SHA,
  signatureUrl: "https://dl.example.com/bootseal-windows-amd64.exe.sig",
  publicKeyPem: PEM,
});

test("defaults of a minimal configuration", () => {
  const c = validateServiceConfig(minimal(), dir);
  assert.deepEqual(c.listen, { host: "127.0.0.1", port: 7480 });
  assert.equal(c.bootstrapToken.ttlMs, 2 * 3_600_000);
  assert.equal(c.bootstrapToken.uses, 10);
  assert.equal(c.oneTimeFetch, "after-success");
  assert.equal(c.limits.bodyBytes, 1024 * 1024);
  assert.equal(c.audit.path, "-");
  assert.equal(c.audit.mode, 0o600);
  assert.equal(c.creationRules.creationRules?.length, 1);
  assert.equal(c.fetcherArtifact, undefined);
  assert.equal(c.fetcherArtifactWindows, undefined);
});

test("every key can come from a BOOTSEAL_* variable, over the file", () => {
  const raw = applyEnv(minimal(), {
    BOOTSEAL_LISTEN: "0.0.0.0:8443",
    BOOTSEAL_STORE: "s3://bucket/prefix",
    BOOTSEAL_S3_ENDPOINT: "http://127.0.0.1:9000",
    BOOTSEAL_S3_FORCE_PATH_STYLE: "true",
    BOOTSEAL_BOOTSTRAP_TOKEN_TTL: "90m",
    BOOTSEAL_BOOTSTRAP_TOKEN_USES: "3",
    BOOTSEAL_ONE_TIME_FETCH: "after-first-fetch",
    BOOTSEAL_LIMITS_BODY_BYTES: "2048",
    BOOTSEAL_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE: "7",
    BOOTSEAL_CONTROLLERS: `[{name: a, tokenSha256: "${HASH}", scopes: [admin]}]`,
    BOOTSEAL_CREATION_RULES: `- path_regex: ^prod/\n  age: ${RECIPIENT}\n`,
    BOOTSEAL_AUDIT_PATH: "audit.log",
    BOOTSEAL_AUDIT_MODE: "0640",
  });
  const c = validateServiceConfig(raw, dir);
  assert.deepEqual(c.listen, { host: "0.0.0.0", port: 8443 });
  assert.equal(c.store, "s3://bucket/prefix");
  assert.deepEqual(c.s3, { endpoint: "http://127.0.0.1:9000", forcePathStyle: true });
  assert.equal(c.bootstrapToken.ttlMs, 90 * 60_000);
  assert.equal(c.bootstrapToken.uses, 3);
  assert.equal(c.oneTimeFetch, "after-first-fetch");
  assert.equal(c.limits.bodyBytes, 2048);
  assert.equal(c.rateLimit.authFailuresPerMinute, 7);
  assert.deepEqual(c.controllers, [{ name: "a", tokenSha256: HASH, scopes: ["admin"], namespaces: ["*"] }]);
  assert.equal(c.creationRules.creationRules?.[0]?.pathRegex, "^prod/");
  assert.equal(c.audit.path, join(dir, "audit.log"));
  assert.equal(c.audit.mode, 0o640);
});

test("bad configurations are refused with one line naming the key", () => {
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...minimal(), listne: "x" }, /^listne: unknown key/],
    [{ ...minimal(), limits: { bodyByte: 1 } }, /^limits\.bodyByte: unknown key/],
    [{ ...minimal(), listen: "nope" }, /^listen: wants HOST:PORT/],
    [{ ...minimal(), store: "ftp://x" }, /^store: must be/],
    [{ ...minimal(), oneTimeFetch: "always" }, /^oneTimeFetch: must be one of/],
    [{ ...minimal(), audit: { mode: "rw-------" } }, /^audit\.mode: must be an octal mode/],
    [{ ...minimal(), bootstrapToken: { ttl: "soon" } }, /^bootstrapToken\.ttl: must be a duration/],
    [{ ...minimal(), bootstrapToken: { uses: 0 } }, /^bootstrapToken\.uses: must be an integer/],
    [{ ...minimal(), limits: { bodyBytes: "lots" } }, /^limits\.bodyBytes: must be an integer/],
    [{ ...minimal(), controllers: [] }, /^controllers: needs at least one/],
    [
      { ...minimal(), controllers: [{ name: "x", tokenSha256: "abc", scopes: ["admin"] }] },
      /tokenSha256: must be 64 hex/,
    ],
    [
      { ...minimal(), controllers: [{ name: "x", tokenSha256: HASH, scopes: ["root"] }] },
      /scopes\[0\]: unknown scope/,
    ],
    [
      { ...minimal(), controllers: [{ name: "x", scopes: ["admin"] }] },
      /tokenSha256: is required unless tls\.clientCa/,
    ],
    [{ ...minimal(), creation_rules: [] }, /^creation_rules: needs at least one rule/],
    [{ ...minimal(), creation_rules: [{ path_regex: "(", age: RECIPIENT }] }, /path_regex/],
    [{ ...minimal(), fetcherArtifact: { url: "https://x/y" } }, /^fetcherArtifact\.sha256: is required/],
    [
      { ...minimal(), fetcherArtifactWindows: { url: "https://x/y.exe" } },
      /^fetcherArtifactWindows\.sha256: is required/,
    ],
    [
      { ...minimal(), fetcherArtifactWindows: { ...windowsArtifact(), sha256: "abc" } },
      /^fetcherArtifactWindows\.sha256: must be 64 hex digits/,
    ],
    [
      { ...minimal(), fetcherArtifactWindows: { ...windowsArtifact(), url: "ftp://x/y.exe" } },
      /^fetcherArtifactWindows\.url: must be an http\(s\) URL/,
    ],
    [
      { ...minimal(), fetcherArtifactWindows: { ...windowsArtifact(), signatureUrl: "y.sig" } },
      /^fetcherArtifactWindows\.signatureUrl: must be an http\(s\) URL/,
    ],
    [
      { ...minimal(), fetcherArtifactWindows: { ...windowsArtifact(), publicKeyFile: "k.pub" } },
      /^fetcherArtifactWindows: needs exactly one of publicKeyPem and publicKeyFile/,
    ],
    [
      { ...minimal(), fetcherArtifactWindows: { ...windowsArtifact(), publicKeyPem: "not a key" } },
      /^fetcherArtifactWindows\.publicKeyPem: must be a PEM public key/,
    ],
    [
      { ...minimal(), fetcherArtifactWindows: { ...windowsArtifact(), arch: "amd64" } },
      /^fetcherArtifactWindows\.arch: unknown key/,
    ],
    [
      {
        ...minimal(),
        fetcherArtifactWindows: { ...windowsArtifact(), publicKeyPem: undefined, publicKeyFile: "nope.pub" },
      },
      /^fetcherArtifactWindows\.publicKeyFile: cannot read/,
    ],
    [
      {
        ...minimal(),
        fetcherArtifact: linuxArtifact(),
        fetcherArtifactWindows: { ...windowsArtifact(), sha256: LINUX_SHA.toUpperCase() },
      },
      /^fetcherArtifactWindows\.sha256: is the same as fetcherArtifact\.sha256/,
    ],
    [{ ...minimal(), logLevel: "loud" }, /^logLevel: must be one of/],
  ];
  for (const [raw, message] of cases) {
    assert.throws(
      () => validateServiceConfig(raw, dir),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, "USAGE", err.message);
        assert.match(err.message, message);
        assert.ok(!err.message.includes("\n"), "one line");
        return true;
      },
    );
  }
});

test("bootstrapToken.derivationKeyFile: a text key loses its line break; random bytes ending in one are used whole", () => {
  const keyOf = (name: string, bytes: Uint8Array | string) => {
    writeFileSync(join(dir, name), bytes, { mode: 0o600 });
    const c = validateServiceConfig({ ...minimal(), bootstrapToken: { derivationKeyFile: name } }, dir);
    return Buffer.from(c.bootstrapToken.derivationKey as Uint8Array);
  };
  const text = "k".repeat(43);
  assert.deepEqual(
    keyOf("text.key", `${text}\n`),
    Buffer.from(text),
    "an editor's line break is not the key's",
  );
  assert.deepEqual(keyOf("crlf.key", `${text}\r\n`), Buffer.from(text));
  // `head -c 32 /dev/urandom` ends in 0x0a or 0x0d one time in 128.
  const random = Buffer.alloc(32, 0xa7);
  random[31] = 0x0a;
  assert.deepEqual(keyOf("random-lf.key", random), random, "all 32 bytes, the last one 0x0a");
  random[30] = 0x0d;
  assert.deepEqual(keyOf("random-crlf.key", random), random);
  const longer = Buffer.concat([Buffer.alloc(32, 0xa7), Buffer.from("\n")]);
  assert.deepEqual(keyOf("random-33.key", longer), longer.subarray(0, 32), "33 bytes: the break still goes");
  assert.throws(
    () => keyOf("short.key", "k".repeat(31)),
    /bootstrapToken\.derivationKeyFile: short\.key holds fewer than 32 bytes$/,
  );
});

test("the file: YAML with duplicate keys is refused; durations", () => {
  const file = join(dir, "dup.yaml");
  writeFileSync(file, "store: file://a\nstore: file://b\n");
  assert.throws(() => readServiceConfigFile(file), /not valid YAML/);
  assert.equal(parseDuration("1h30m", "t"), 5_400_000);
  assert.equal(parseDuration("1s", "t"), 1000);
  assert.equal(parseDuration(30, "t"), 30_000);
  assert.throws(() => validateServiceConfig({ ...minimal(), bootstrapToken: { ttl: "500ms" } }, dir), {
    code: "USAGE",
    message: "bootstrapToken.ttl: must be at least 1s",
  });
  assert.equal(
    validateServiceConfig({ ...minimal(), bootstrapToken: { ttl: 30 } }, dir).bootstrapToken.ttlMs,
    30_000,
  );
});

test("trustProxy: off by default; true, or a list of addresses/CIDRs; anything else refused", () => {
  assert.equal(validateServiceConfig(minimal(), dir).trustProxy, false);
  assert.equal(validateServiceConfig({ ...minimal(), trustProxy: "true" }, dir).trustProxy, true);
  assert.deepEqual(
    validateServiceConfig({ ...minimal(), trustProxy: "10.0.0.0/8, 127.0.0.1" }, dir).trustProxy,
    ["10.0.0.0/8", "127.0.0.1"],
  );
  assert.deepEqual(validateServiceConfig({ ...minimal(), trustProxy: ["fd00::/8"] }, dir).trustProxy, [
    "fd00::/8",
  ]);
  assert.throws(
    () => validateServiceConfig({ ...minimal(), trustProxy: "lb.example.com" }, dir),
    /trustProxy/,
  );
});

test("fetcherArtifact (Linux) and fetcherArtifactWindows are parsed side by side, each on its own", () => {
  const both = validateServiceConfig(
    { ...minimal(), fetcherArtifact: linuxArtifact(), fetcherArtifactWindows: windowsArtifact() },
    dir,
  );
  assert.deepEqual(both.fetcherArtifact, { ...linuxArtifact(), publicKeyPem: PEM.trim() });
  assert.deepEqual(both.fetcherArtifactWindows, { ...windowsArtifact(), publicKeyPem: PEM.trim() });
  // Backward compatible: a configuration with only fetcherArtifact stays valid (Linux stubs only).
  const linuxOnly = validateServiceConfig({ ...minimal(), fetcherArtifact: linuxArtifact() }, dir);
  assert.equal(linuxOnly.fetcherArtifact?.sha256, LINUX_SHA);
  assert.equal(linuxOnly.fetcherArtifactWindows, undefined);
  // And the reverse: Windows only; nothing is copied from one to the other.
  const windowsOnly = validateServiceConfig({ ...minimal(), fetcherArtifactWindows: windowsArtifact() }, dir);
  assert.equal(windowsOnly.fetcherArtifact, undefined);
  assert.equal(windowsOnly.fetcherArtifactWindows?.url, windowsArtifact().url);
  // publicKeyFile is read relative to the working directory; the hash is lower-cased.
  writeFileSync(join(dir, "windows-release.pub"), PEM);
  const fromFile = validateServiceConfig(
    {
      ...minimal(),
      fetcherArtifactWindows: {
        ...windowsArtifact(),
        sha256: "ABCDEF".padEnd(64, "0"),
        publicKeyPem: undefined,
        publicKeyFile: "windows-release.pub",
      },
    },
    dir,
  );
  assert.equal(fromFile.fetcherArtifactWindows?.publicKeyPem, PEM.trim());
  assert.equal(fromFile.fetcherArtifactWindows?.sha256, "abcdef".padEnd(64, "0"));
});

test("BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_* variables set fetcherArtifactWindows, over the file", () => {
  writeFileSync(join(dir, "win.pub"), PEM);
  const raw = applyEnv(
    { ...minimal(), fetcherArtifactWindows: { ...windowsArtifact(), url: "https://old.example.com/b.exe" } },
    {
      BOOTSEAL_FETCHER_ARTIFACT_URL: "https://dl.example.com/bootseal-linux-arm64",
      BOOTSEAL_FETCHER_ARTIFACT_SHA256: LINUX_SHA,
      BOOTSEAL_FETCHER_ARTIFACT_SIGNATURE_URL: "https://dl.example.com/bootseal-linux-arm64.sig",
      BOOTSEAL_FETCHER_ARTIFACT_PUBLIC_KEY_PEM: PEM,
      BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_URL: "https://dl.example.com/bootseal-windows-arm64.exe",
      BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_SHA256: "3".repeat(64),
      BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_SIGNATURE_URL:
        "https://dl.example.com/bootseal-windows-arm64.exe.sig",
    },
  );
  const c = validateServiceConfig(raw, dir);
  assert.deepEqual(c.fetcherArtifact, {
    url: "https://dl.example.com/bootseal-linux-arm64",
    sha256: LINUX_SHA,
    signatureUrl: "https://dl.example.com/bootseal-linux-arm64.sig",
    publicKeyPem: PEM.trim(),
  });
  assert.deepEqual(c.fetcherArtifactWindows, {
    url: "https://dl.example.com/bootseal-windows-arm64.exe",
    sha256: "3".repeat(64),
    signatureUrl: "https://dl.example.com/bootseal-windows-arm64.exe.sig",
    publicKeyPem: PEM.trim(),
  });

  // From variables alone, with the key in a file.
  const fromEnv = validateServiceConfig(
    applyEnv(minimal(), {
      BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_URL: "https://dl.example.com/b.exe",
      BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_SHA256: WINDOWS_SHA,
      BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_SIGNATURE_URL: "https://dl.example.com/b.exe.sig",
      BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_PUBLIC_KEY_FILE: "win.pub",
    }),
    dir,
  );
  assert.equal(fromEnv.fetcherArtifactWindows?.publicKeyPem, PEM.trim());
  assert.equal(fromEnv.fetcherArtifact, undefined, "the Windows variables never fill fetcherArtifact");

  const pemOnly = applyEnv(minimal(), { BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_PUBLIC_KEY_PEM: PEM });
  assert.deepEqual(pemOnly.fetcherArtifactWindows, { publicKeyPem: PEM });
  // An incomplete set of variables is refused, naming the Windows key.
  assert.throws(() => validateServiceConfig(pemOnly, dir), {
    code: "USAGE",
    message: "fetcherArtifactWindows.url: is required",
  });
});

test("docs/configuration.md's reference table is the one generated from the schema", () => {
  const doc = readFileSync(DOC_PATH, "utf8");
  assert.equal(doc, withTable(doc), "run: node scripts/config-docs.ts --write");
  const table = configTable();
  for (const { env } of ENV_KEYS) assert.ok(table.includes(`\`${env}\``), `${env} is documented`);
});

test("one rule names every variable; the names documented before are all still there", () => {
  assert.equal(
    envName(["rateLimit", "authFailuresPerMinute"]),
    "BOOTSEAL_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE",
  );
  assert.equal(envName(["creation_rules"]), "BOOTSEAL_CREATION_RULES");
  assert.equal(envName(["s3", "forcePathStyle"]), "BOOTSEAL_S3_FORCE_PATH_STYLE");
  const names = new Set(ENV_KEYS.map((k) => k.env));
  for (const name of [
    "BOOTSEAL_LISTEN",
    "BOOTSEAL_PUBLIC_URL",
    "BOOTSEAL_TRUST_PROXY",
    "BOOTSEAL_TLS_CERT",
    "BOOTSEAL_TLS_KEY",
    "BOOTSEAL_TLS_CLIENT_CA",
    "BOOTSEAL_STORE",
    "BOOTSEAL_S3_ENDPOINT",
    "BOOTSEAL_S3_REGION",
    "BOOTSEAL_S3_FORCE_PATH_STYLE",
    "BOOTSEAL_CREATION_RULES",
    "BOOTSEAL_CONTROLLERS",
    "BOOTSEAL_BOOTSTRAP_TOKEN_TTL",
    "BOOTSEAL_BOOTSTRAP_TOKEN_USES",
    "BOOTSEAL_ONE_TIME_FETCH",
    "BOOTSEAL_LIMITS_BODY_BYTES",
    "BOOTSEAL_RATE_LIMIT_AUTH_FAILURES_PER_MINUTE",
    "BOOTSEAL_FETCHER_ARTIFACT_URL",
    "BOOTSEAL_FETCHER_ARTIFACT_SHA256",
    "BOOTSEAL_FETCHER_ARTIFACT_SIGNATURE_URL",
    "BOOTSEAL_FETCHER_ARTIFACT_PUBLIC_KEY_PEM",
    "BOOTSEAL_FETCHER_ARTIFACT_PUBLIC_KEY_FILE",
    "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_URL",
    "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_SHA256",
    "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_SIGNATURE_URL",
    "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_PUBLIC_KEY_PEM",
    "BOOTSEAL_FETCHER_ARTIFACT_WINDOWS_PUBLIC_KEY_FILE",
    "BOOTSEAL_AUDIT_PATH",
    "BOOTSEAL_EVENTS_HEARTBEAT_SECONDS",
    "BOOTSEAL_EVENTS_BUFFER_SIZE",
    "BOOTSEAL_DATA_DIR",
    "BOOTSEAL_LOG_LEVEL",
  ]) {
    assert.ok(names.has(name), name);
  }
  assert.deepEqual(
    ENV_KEYS.filter((k) => k.yaml).map((k) => k.env),
    [
      "BOOTSEAL_CREATION_RULES",
      "BOOTSEAL_CONTROLLERS",
      "BOOTSEAL_KUBERNETES_BINDINGS",
      "BOOTSEAL_CONTROLLER_AUTH_KUBERNETES_AUDIENCES",
      "BOOTSEAL_BOOTSTRAP_COMMANDS",
      "BOOTSEAL_MACHINE_AUTH_AZURE_ISSUERS",
      "BOOTSEAL_MACHINE_AUTH_SPIFFE_TRUST_DOMAINS",
      "BOOTSEAL_MACHINE_AUTH_BINDINGS",
    ],
  );
  // Every variable lands on the key it names: set each one alone and find it in the raw config.
  for (const { env, path } of configLeaves()) {
    const raw = applyEnv({}, { [env]: "[x]" });
    let node: unknown = raw;
    for (const key of path) node = (node as Record<string, unknown>)[key];
    assert.ok(node !== undefined, `${env} sets ${path.join(".")}`);
  }
});

test("the schema's defaults fill a minimal configuration, file values and variables are coerced by type", () => {
  const c = validateServiceConfig(minimal(), dir);
  assert.deepEqual(c.rateLimit, { authFailuresPerMinute: 20 });
  assert.deepEqual(c.events, { heartbeatSeconds: 15, bufferSize: 1000 });
  assert.equal(c.dataDir, join(dir, "data"));
  assert.equal(schemaDefault(["dataDir"]), "./data");
  assert.equal(schemaDefault(["bootstrapToken", "ttl"]), "2h");
  assert.equal(schemaDefault(["store"]), undefined);
  assert.equal(c.logLevel, "info");
  assert.deepEqual(c.s3, {});
  const coerced = validateServiceConfig(
    {
      ...minimal(),
      s3: { forcePathStyle: "yes", region: " eu-west-1 " },
      events: { bufferSize: " 10 " },
      oneTimeFetch: false,
      listen: null,
    },
    dir,
  );
  assert.deepEqual(coerced.s3, { forcePathStyle: true, region: "eu-west-1" });
  assert.equal(coerced.events.bufferSize, 10);
  assert.equal(coerced.oneTimeFetch, "off");
  assert.deepEqual(coerced.listen, { host: "127.0.0.1", port: 7480 });
  const cases: [Record<string, unknown>, string][] = [
    [{ ...minimal(), store: undefined }, "store: is required"],
    [
      { ...minimal(), controllers: undefined },
      "controllers: needs at least one controller ({name, tokenSha256, scopes})",
    ],
    [{ ...minimal(), store: "  " }, "store: must be a non-empty string"],
    [{ ...minimal(), s3: { forcePathStyle: "maybe" } }, "s3.forcePathStyle: must be true or false"],
    [{ ...minimal(), s3: "x" }, "s3: must be a mapping"],
    [{ ...minimal(), tls: { cert: "c.pem" } }, "tls.key: is required"],
    [
      { ...minimal(), oneTimeFetch: true },
      "oneTimeFetch: must be one of off, after-success, after-first-fetch",
    ],
    [
      { ...minimal(), events: { heartbeatSeconds: 4000 } },
      "events.heartbeatSeconds: must be an integer from 1 to 3600",
    ],
    [
      { ...minimal(), trustProxy: [5] },
      "trustProxy: must be true, false, or a list of IP addresses or CIDRs",
    ],
    [{ ...minimal(), trustProxy: 5 }, "trustProxy: must be true, false, or a list of IP addresses or CIDRs"],
    [
      { ...minimal(), controllers: [{ name: "a", tokenSha256: HASH, scopes: ["admin"], extra: 1 }] },
      "controllers[0].extra: unknown key (allowed: name, tokenSha256, scopes, namespaces)",
    ],
    [
      {
        ...minimal(),
        controllers: [
          { name: "a", tokenSha256: HASH, scopes: ["admin"] },
          { name: "a", tokenSha256: HASH, scopes: ["admin"] },
        ],
      },
      'controllers[1].name: duplicate controller name "a"',
    ],
    [
      { ...minimal(), creation_rules: "x" },
      "creation_rules: needs at least one rule (same shape as .sops.yaml creation_rules)",
    ],
  ];
  for (const [raw, message] of cases) {
    assert.throws(() => validateServiceConfig(raw, dir), { code: "USAGE", message });
  }
  assert.throws(() => applyEnv({}, { BOOTSEAL_CONTROLLERS: "[a" }), {
    code: "USAGE",
    message: "BOOTSEAL_CONTROLLERS: not valid YAML",
  });
});
