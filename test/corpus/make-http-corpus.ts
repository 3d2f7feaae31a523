/**
 * Writes test/corpus/http-bad-input.json: the bad-input corpus run by http-bad-input.test.ts
 * against a real `bootseal serve`. Deterministic (no randomness, no clock): run
 * `node_modules/.bin/node test/corpus/make-http-corpus.ts` and commit the JSON.
 *
 * A case is sent either with fetch() (`transport: "fetch"`: method, path, headers, body or
 * bodyBase64) or written on a raw socket (`transport: "raw"`: the whole request in `raw`,
 * latin1, or `rawBase64`; `hold: true` keeps the socket open after writing, for truncated
 * requests the server must time out). Placeholders `{{NAME}}` are filled in by the test with
 * the credentials and values it created (see PLACEHOLDERS there). `expect` lists the statuses
 * that are right; `stream: true` marks a server-sent-events answer (read the head, then close).
 */
import { writeFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

export interface CorpusCase {
  id: string;
  route: string;
  transport: "fetch" | "raw";
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string;
  bodyBase64?: string;
  raw?: string;
  rawBase64?: string;
  hold?: boolean;
  stream?: boolean;
  expect: number[];
}

const cases: CorpusCase[] = [];
const seen = new Map<string, number>();
function add(c: Omit<CorpusCase, "id"> & { id?: string }): void {
  const base = (c.id ?? `${c.route}:${c.method ?? "raw"}`).replace(/\s+/g, "-");
  const n = (seen.get(base) ?? 0) + 1;
  seen.set(base, n);
  // A status report the service takes is 200 when written and 202 when held (an intermediate
  // phase: docs/api.md, Status durability); either is a success.
  const expect = c.route === "postStatus" && c.expect.includes(200) ? [...c.expect, 202] : c.expect;
  cases.push({ ...c, id: `${base}#${n}`, expect } as CorpusCase);
}

const M0 = "corpus/m0";
const ROUTES = {
  putConfig: { method: "PUT", suffix: "config" },
  getConfig: { method: "GET", suffix: "config" },
  deleteConfig: { method: "DELETE", suffix: "config" },
  postStatus: { method: "POST", suffix: "status" },
  getStatus: { method: "GET", suffix: "status" },
  userdata: { method: "GET", suffix: "userdata?format=cloud-init" },
} as const;
type RouteName = keyof typeof ROUTES;

const bearer = (t: string) => ({ authorization: `Bearer {{${t}}}` });
const JSON_CT = { "content-type": "application/json" };

function raw(lines: string[], body = ""): string {
  return `${lines.join("\r\n")}\r\n\r\n${body}`;
}

/** Bad DNS-1123 labels, as they appear in a request target (already escaped where needed). */
const BAD_LABELS: string[] = [
  "UPPER",
  "Mixed-Case",
  "-lead",
  "trail-",
  "a_b",
  "a.b",
  "..",
  ".",
  "...",
  "%2e%2e",
  "%2E%2E%2F%2E%2E%2Fetc",
  "a%2Fb",
  "a%5Cb",
  "a%00b",
  "%00",
  "a%20b",
  "%C3%BCnic%C3%B6de",
  "%E2%80%AEevil",
  "%FF%FE",
  "%",
  "%zz",
  "%2",
  "a+b",
  "a;b",
  "a@b",
  "~root",
  "x".repeat(64),
  "x".repeat(300),
  "y".repeat(6000),
  "a--",
  "*",
  "%2A",
  "a%0d%0aSet-Cookie:x",
  "%252e%252e",
  "%u002e",
];

function machinePath(ns: string, name: string, route: RouteName): string {
  return `/v1/machines/${ns}/${name}/${ROUTES[route].suffix}`;
}

// 1. Bad names on every per-machine route, in both positions, on raw sockets (no URL
// normalisation by a client library: `..` and `.` reach the server as sent).
for (const route of Object.keys(ROUTES) as RouteName[]) {
  const { method } = ROUTES[route];
  for (const label of BAD_LABELS) {
    for (const [ns, name] of [
      [label, "m0"],
      ["corpus", label],
    ] as const) {
      const target = machinePath(ns, name, route);
      const needsBody = method === "PUT" || method === "POST";
      const body = method === "POST" ? '{"phase":"running"}' : method === "PUT" ? "payload {{CANARY}}" : "";
      const auth = route === "postStatus" ? "{{MACHINE}}" : "{{ADMIN}}";
      add({
        id: `name:${route}:${ns === label ? "ns" : "name"}`,
        route,
        transport: "raw",
        raw: raw(
          [
            `${method} ${target} HTTP/1.1`,
            "Host: localhost",
            `Authorization: Bearer ${auth}`,
            "Connection: close",
            ...(needsBody
              ? [
                  `Content-Type: ${method === "POST" ? "application/json" : "text/plain"}`,
                  "Content-Length: {{LEN}}",
                ]
              : []),
          ],
          body,
        ),
        // 404: the label broke the path into other segments; 414/431: a very long target;
        // 403: the machine's token names another machine than the path (checked first).
        expect: route === "postStatus" ? [400, 403, 404, 414, 431] : [400, 404, 414, 431],
      });
    }
  }
}
// Names that are bad only through fetch() too (the client encodes them; the server must refuse).
for (const label of ["Ünïcödé", "a b", "a\tb", "日本", "a\u0000b", "a%2Fb", "x".repeat(64), "UPPER"]) {
  for (const route of ["getConfig", "getStatus", "deleteConfig"] as RouteName[]) {
    add({
      id: `name-fetch:${route}`,
      route,
      transport: "fetch",
      method: ROUTES[route].method,
      path: machinePath("corpus", encodeURIComponent(label), route),
      headers: bearer("ADMIN"),
      expect: [400],
    });
  }
}
// A valid label in the namespace but a machine token: still refused (400 first, or 403).
for (const label of BAD_LABELS.slice(0, 12)) {
  add({
    id: "name:getConfig:machine-token",
    route: "getConfig",
    transport: "raw",
    raw: raw([
      `GET ${machinePath("corpus", label, "getConfig")} HTTP/1.1`,
      "Host: localhost",
      "Authorization: Bearer {{MACHINE}}",
      "Connection: close",
    ]),
    expect: [400, 403, 404],
  });
}

// 2. Credentials on every authenticated route.
interface Target {
  route: string;
  method: string;
  path: string;
  headers?: Record<string, string>;
  body?: string;
  /** The status a right credential of the right kind gets here (only for the "ok" variants). */
  machineOk: boolean;
}
const statusBody = '{"phase":"running","message":"corpus"}';
const TARGETS: Target[] = [
  { route: "getConfig", method: "GET", path: `/v1/machines/${M0}/config`, machineOk: true },
  {
    route: "putConfig",
    method: "PUT",
    path: "/v1/machines/corpus/put/config",
    headers: { "content-type": "text/plain" },
    body: "plain {{CANARY}}",
    machineOk: false,
  },
  { route: "deleteConfig", method: "DELETE", path: "/v1/machines/corpus/del/config", machineOk: false },
  {
    route: "postStatus",
    method: "POST",
    path: `/v1/machines/${M0}/status`,
    headers: JSON_CT,
    body: statusBody,
    machineOk: true,
  },
  { route: "getStatus", method: "GET", path: `/v1/machines/${M0}/status`, machineOk: false },
  { route: "list", method: "GET", path: "/v1/machines?namespace=corpus", machineOk: false },
  {
    route: "userdata",
    method: "GET",
    path: "/v1/machines/corpus/ud/userdata?format=cloud-init",
    machineOk: false,
  },
];
const BAD_AUTH: { id: string; value?: string; expect: number[]; machineRoute?: number[] }[] = [
  { id: "none", expect: [401] },
  { id: "empty", value: "", expect: [401] },
  { id: "bearer-only", value: "Bearer", expect: [401] },
  { id: "bearer-space", value: "Bearer  ", expect: [401] },
  { id: "basic", value: "Basic YWRtaW46aHVudGVyMg==", expect: [401] },
  { id: "digest", value: 'Digest username="admin"', expect: [401] },
  { id: "token-no-scheme", value: "{{ADMIN}}", expect: [401] },
  { id: "bearer-wrong", value: "Bearer not-a-token-at-all", expect: [401] },
  { id: "bearer-two-words", value: "Bearer {{ADMIN}} extra", expect: [401] },
  { id: "bearer-comma", value: "Bearer {{ADMIN}},Bearer {{READER}}", expect: [401] },
  { id: "bearer-long", value: `Bearer ${"A".repeat(8000)}`, expect: [401] },
  { id: "bst-made-up", value: `Bearer bst.corpus.m0.${"Q".repeat(43)}`, expect: [401, 403] },
  { id: "bst-short", value: "Bearer bst.corpus.m0.short", expect: [401, 403] },
  { id: "bst-no-secret", value: "Bearer bst.corpus.m0.", expect: [401, 403] },
  { id: "bst-bad-ns", value: `Bearer bst.CORPUS.m0.${"Q".repeat(43)}`, expect: [401, 403] },
  { id: "bst-dots", value: `Bearer bst.corpus.m0.x.${"Q".repeat(43)}`, expect: [401, 403] },
  { id: "bst-prefix-only", value: "Bearer bst.", expect: [401, 403] },
  { id: "replaced", value: "Bearer {{REPLACED}}", expect: [401, 403] },
  { id: "expired-other", value: "Bearer {{STALE}}", expect: [401, 403] },
  { id: "other-machine", value: "Bearer {{OTHER}}", expect: [403] },
];
for (const t of TARGETS) {
  for (const a of BAD_AUTH) {
    const headers: Record<string, string> = { ...t.headers };
    if (a.value !== undefined) headers.authorization = a.value;
    add({
      id: `auth:${t.route}:${a.id}`,
      route: t.route,
      transport: "fetch",
      method: t.method,
      path: t.path,
      headers,
      ...(t.body !== undefined ? { body: t.body } : {}),
      expect: a.id === "other-machine" && !t.machineOk ? [403] : a.expect,
    });
  }
  // Scopes: who is not allowed here.
  const wrong: string[] = [];
  if (t.route === "putConfig" || t.route === "deleteConfig" || t.route === "userdata")
    wrong.push("READER", "MACHINE");
  if (t.route === "getStatus" || t.route === "list") wrong.push("WRITER", "MACHINE");
  if (t.route === "getConfig") wrong.push("WRITER");
  if (t.route === "postStatus") wrong.push("ADMIN", "READER", "WRITER");
  for (const who of wrong) {
    add({
      id: `scope:${t.route}:${who.toLowerCase()}`,
      route: t.route,
      transport: "fetch",
      method: t.method,
      path: t.path,
      headers: { ...t.headers, ...bearer(who) },
      ...(t.body !== undefined ? { body: t.body } : {}),
      expect: [403],
    });
  }
  // Duplicate credentials, and credentials with bytes fetch() cannot send: raw.
  const body = t.body ?? "";
  const extra = [
    ...(t.headers?.["content-type"] ? [`Content-Type: ${t.headers["content-type"]}`] : []),
    ...(t.body !== undefined ? ["Content-Length: {{LEN}}"] : []),
  ];
  for (const [id, lines, expect] of [
    ["dup-auth", ["Authorization: Bearer {{ADMIN}}", "Authorization: Bearer {{ADMIN}}"], [400]],
    ["dup-auth-mixed", ["Authorization: Bearer {{READER}}", "Authorization: Bearer {{ADMIN}}"], [400]],
    [
      "dup-proxy-auth",
      ["Authorization: Bearer {{ADMIN}}", "Proxy-Authorization: a", "Proxy-Authorization: b"],
      [400],
    ],
    ["auth-utf8", ["Authorization: Bearer t\u00c3\u00a9st-\u00e2\u0082\u00ac"], [400, 401]],
    ["auth-nul", ["Authorization: Bearer abc\u0000def"], [400]],
    ["auth-cr", ["Authorization: Bearer abc\rdef"], [400]],
    ["auth-huge", [`Authorization: Bearer ${"Z".repeat(20_000)}`], [431]],
  ] as const) {
    add({
      id: `auth-raw:${t.route}:${id}`,
      route: t.route,
      transport: "raw",
      raw: raw(
        [`${t.method} ${t.path} HTTP/1.1`, "Host: localhost", "Connection: close", ...lines, ...extra],
        body,
      ),
      expect: [...expect],
    });
  }
}
// Expired (and used-up) token on its own machine's routes.
for (const [route, method, path, body] of [
  ["getConfig", "GET", "/v1/machines/corpus/exp/config", undefined],
  ["postStatus", "POST", "/v1/machines/corpus/exp/status", statusBody],
  ["deleteConfig", "DELETE", "/v1/machines/corpus/exp/config", undefined],
] as const) {
  add({
    id: `auth:${route}:expired`,
    route,
    transport: "fetch",
    method,
    path,
    headers: { ...bearer("STALE"), ...(body ? JSON_CT : {}) },
    ...(body ? { body } : {}),
    expect: method === "DELETE" ? [401, 403] : [401],
  });
}
// The machine's own DELETE with oneTimeFetch off: refused.
add({
  id: "scope:deleteConfig:machine-own",
  route: "deleteConfig",
  transport: "fetch",
  method: "DELETE",
  path: `/v1/machines/${M0}/config`,
  headers: bearer("MACHINE"),
  expect: [403],
});
// Tokens on the events stream.
for (const a of BAD_AUTH.slice(0, 12)) {
  add({
    id: `auth:events:${a.id}`,
    route: "events",
    transport: "fetch",
    method: "GET",
    path: "/v1/events",
    headers: a.value !== undefined ? { authorization: a.value } : {},
    expect: a.expect,
  });
}
for (const who of ["WRITER", "MACHINE"]) {
  add({
    id: `scope:events:${who.toLowerCase()}`,
    route: "events",
    transport: "fetch",
    method: "GET",
    path: "/v1/events",
    headers: bearer(who),
    expect: [403],
  });
}

// 3. Query values.
const BAD_QUERY_LABELS = [
  "UPPER",
  "-x",
  "a_b",
  "a.b",
  "..",
  "%2e%2e",
  "a%2Fb",
  "%00",
  "%C3%BC",
  "x".repeat(64),
  "",
];
for (const v of [
  "xml",
  "YAML",
  "Json",
  "",
  "yaml%00",
  "binary",
  "envelope",
  "yaml&format=json",
  "json&format=json",
  "y".repeat(3000),
]) {
  add({
    id: "query:putConfig:format",
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: `/v1/machines/corpus/put/config?format=${v}`,
    headers: { ...bearer("ADMIN"), "content-type": "text/plain" },
    body: "a: {{CANARY}}",
    expect: [400],
  });
}
for (const q of ["format[]=yaml", "format[0]=yaml", "foo=1", "format=yaml&x=1", "%zz=1", "format=%zz"]) {
  add({
    id: "query:putConfig:shape",
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: `/v1/machines/corpus/put/config?${q}`,
    headers: { ...bearer("ADMIN"), "content-type": "text/plain" },
    body: "a: {{CANARY}}",
    expect: [400],
  });
}
for (const q of [
  "",
  "format=",
  "format=cloudinit",
  "format=CLOUD-INIT",
  "format=cloud-init%00",
  "format=cloud-init&format=ignition",
  "format=ignition&extra=1",
  "format[]=ignition",
  "format=bash",
  "format=%zz",
  `format=${"p".repeat(5000)}`,
  "format=powershell%20",
]) {
  add({
    id: "query:userdata:format",
    route: "userdata",
    transport: "fetch",
    method: "GET",
    path: `/v1/machines/corpus/ud/userdata${q ? `?${q}` : ""}`,
    headers: bearer("ADMIN"),
    expect: [400],
  });
}
for (const v of BAD_QUERY_LABELS.filter((x) => x !== "")) {
  add({
    id: "query:list:namespace",
    route: "list",
    transport: "fetch",
    method: "GET",
    path: `/v1/machines?namespace=${v}`,
    headers: bearer("READER"),
    expect: [400],
  });
  add({
    id: "query:events:namespace",
    route: "events",
    transport: "fetch",
    method: "GET",
    path: `/v1/events?namespace=${v}`,
    headers: bearer("READER"),
    expect: [400],
  });
}
for (const v of [
  "PUBLISHED",
  "unknown",
  "",
  "running%00",
  "running&phase=failed",
  "succeeded,failed",
  "p".repeat(500),
  "%C3%A9",
]) {
  add({
    id: "query:list:phase",
    route: "list",
    transport: "fetch",
    method: "GET",
    path: `/v1/machines?phase=${v}`,
    headers: bearer("READER"),
    expect: [400],
  });
}
for (const v of [
  "0",
  "-1",
  "1001",
  "1.5",
  "abc",
  "",
  "99999999999999999999",
  "1e3x",
  "10&limit=20",
  "%00",
  "NaN",
  "Infinity",
  "-Infinity",
  "1e400",
  "%2BInfinity",
]) {
  add({
    id: "query:list:limit",
    route: "list",
    transport: "fetch",
    method: "GET",
    path: `/v1/machines?limit=${v}`,
    headers: bearer("READER"),
    expect: [400],
  });
}
// Spellings of a number that a lenient reader takes (16, 100): fine either way, never a 5xx.
for (const v of ["0x10", "1e2", " 5", "0b11", "010"]) {
  add({
    id: "query:list:limit-spelling",
    route: "list",
    transport: "fetch",
    method: "GET",
    path: `/v1/machines?limit=${v}`,
    headers: bearer("READER"),
    expect: [200, 400],
  });
}
for (const v of [
  "..",
  "a/b/c",
  "%2e%2e%2f%2e%2e",
  "x".repeat(5000),
  "%C3%BC",
  "corpus/m0&after=x",
  "%00",
  "/",
]) {
  add({
    id: "query:list:after",
    route: "list",
    transport: "fetch",
    method: "GET",
    path: `/v1/machines?after=${v}`,
    headers: bearer("READER"),
    // `after` is `ns/name` (two DNS-1123 labels): anything else is refused.
    expect: [400],
  });
}
for (const q of ["foo=1", "namespace=corpus&extra=1", "namespace[]=corpus", "%zz"]) {
  add({
    id: "query:list:shape",
    route: "list",
    transport: "fetch",
    method: "GET",
    path: `/v1/machines?${q}`,
    headers: bearer("READER"),
    expect: [400],
  });
  add({
    id: "query:events:shape",
    route: "events",
    transport: "fetch",
    method: "GET",
    path: `/v1/events?${q}`,
    headers: bearer("READER"),
    expect: [400],
  });
}
for (const q of ["foo=1", "%zz", "format=yaml"]) {
  for (const route of ["getConfig", "getStatus", "deleteConfig", "postStatus"] as RouteName[]) {
    const post = route === "postStatus";
    add({
      id: `query:${route}:unknown`,
      route,
      transport: "fetch",
      method: ROUTES[route].method,
      path: `${machinePath("corpus", route === "deleteConfig" ? "del" : "m0", route)}?${q}`,
      headers: { ...bearer(post ? "MACHINE" : "ADMIN"), ...(post ? JSON_CT : {}) },
      ...(post ? { body: statusBody } : {}),
      // These routes declare no query: extra parameters are ignored or refused, never a 5xx.
      expect: route === "deleteConfig" ? [204, 400, 404] : [200, 400],
    });
  }
}
// Valid streams with odd resume ids: answered, never a 5xx.
for (const id of ["garbage", "-1", "1e308", "99999999999999999999999", "", "0x1f", "1.5", "\u00e9"]) {
  add({
    id: "events:last-event-id",
    route: "events",
    transport: "raw",
    raw: raw([
      "GET /v1/events?namespace=corpus HTTP/1.1",
      "Host: localhost",
      "Authorization: Bearer {{READER}}",
      `Last-Event-ID: ${id}`,
      "Connection: close",
    ]),
    stream: true,
    expect: [200],
  });
}

// 4. Publish bodies (controller, scratch machine corpus/put).
function nested(depth: number, open: string, close: string, leaf = "1"): string {
  return open.repeat(depth) + leaf + close.repeat(depth);
}
const bomb = (levels: number) =>
  [
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]',
    ..."bcdefghij"
      .slice(0, levels - 1)
      .split("")
      .map((l, i) => `${l}: &${l} [${Array(9).fill(`*${"abcdefghij"[i]}`).join(",")}]`),
  ].join("\n");
const badJson: [string, string][] = [
  ["truncated", '{"a": "{{CANARY}}"'],
  ["open", "["],
  ["number", "123"],
  ["string", '"{{CANARY}}"'],
  ["null", "null"],
  ["array", '["{{CANARY}}"]'],
  ["true", "true"],
  ["deep-array", nested(300, "[", "]")],
  ["deep-object", nested(300, '{"a":', "}")],
  ["very-deep-array", nested(5000, "[", "]")],
  ["trailing", '{"a":"{{CANARY}}"} x'],
  ["single-quotes", "{'a':'{{CANARY}}'}"],
  ["comment", '{"a":"{{CANARY}}" /* c */}'],
  ["nan", '{"a": NaN}'],
  ["binary-shape-extra", '{"data":"{{CANARY}}","x":""}'],
  ["sops-key", '{"a":"{{CANARY}}","sops":{"version":"3.9.0"}}'],
  ["sops-only", '{"sops":{}}'],
  ["control-char", '{"a":"\u0001{{CANARY}}"}'],
  ["empty", ""],
  ["whitespace", "   \n\t "],
];
for (const [id, body] of badJson) {
  add({
    id: `body:putConfig:json:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: "/v1/machines/corpus/put/config?format=json",
    headers: { ...bearer("ADMIN"), "content-type": "application/json" },
    body,
    expect: [400, 413],
  });
}
const badYaml: [string, string][] = [
  ["bomb-4", bomb(4)],
  ["bomb-6", bomb(6)],
  ["bomb-9", bomb(9)],
  ["self-alias", "a: &a [*a]"],
  ["undefined-alias", "a: *nope"],
  ["deep-flow", nested(300, "[", "]")],
  ["deep-block", Array.from({ length: 300 }, (_, i) => `${" ".repeat(i)}- `).join("\n") + "x"],
  ["very-deep-flow", nested(5000, "{a: ", "}")],
  ["tab-indent", "a:\n\tb: {{CANARY}}"],
  ["unclosed", "a: [{{CANARY}}"],
  ["bad-indent", "a:\n  b: 1\n c: {{CANARY}}"],
  ["multi-doc", "a: 1\n---\nb: {{CANARY}}"],
  ["scalar", "{{CANARY}}"],
  ["sequence-root", "- {{CANARY}}"],
  ["sops-key", "a: {{CANARY}}\nsops:\n  version: 3.9.0"],
  ["unknown-tag", "a: !!python/object {{CANARY}}"],
  ["dup-key", "a: 1\na: {{CANARY}}"],
  [
    "merge-small",
    `a: &a {x: 1}\n${Array.from({ length: 50 }, (_, i) => `k${i}: {<<: [*a,*a,*a,*a,*a,*a,*a,*a]}`).join("\n")}`,
  ],
  ["directive", "%YAML 9.9\n---\na: {{CANARY}}"],
  ["empty", ""],
  ["long-key", `${"k".repeat(2000)}: {{CANARY}}`],
  ["complex-key", "? [a, b]\n: {{CANARY}}"],
];
for (const [id, body] of badYaml) {
  add({
    id: `body:putConfig:yaml:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: "/v1/machines/corpus/put/config?format=yaml",
    headers: { ...bearer("ADMIN"), "content-type": "application/yaml" },
    body,
    // Some are valid YAML that a strict reader may still take (dup keys, long keys): 2xx is fine then.
    expect: [
      "dup-key",
      "long-key",
      "complex-key",
      "unknown-tag",
      "directive",
      "multi-doc",
      "scalar",
      "sequence-root",
      "self-alias",
      "merge-small",
    ].includes(id)
      ? [200, 201, 400, 413]
      : [400, 413],
  });
}
// Invalid UTF-8 and binary bodies.
const binaries: [string, string, Buffer][] = [
  [
    "json-invalid-utf8",
    "json",
    Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xc3, 0x28, 0xff, 0xfe]), Buffer.from('"}')]),
  ],
  [
    "yaml-invalid-utf8",
    "yaml",
    Buffer.concat([Buffer.from("a: "), Buffer.from([0xed, 0xa0, 0x80, 0xc0, 0xaf])]),
  ],
  ["json-utf16", "json", Buffer.from('\ufeff{"a":"b"}', "utf16le")],
  ["yaml-nul", "yaml", Buffer.from("a: b\u0000c")],
  [
    "json-overlong",
    "json",
    Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xe0, 0x80, 0xaf]), Buffer.from('"}')]),
  ],
];
// A lone surrogate and bytes that are not UTF-8 are replaced (U+FFFD) by a lenient decoder, as
// Go's encoding/json does: refused or taken, never a 5xx. (Reported: the payload changes.)
const lenient = new Set(["yaml-nul", "lone-surrogate"]);
binaries.push(
  ["yaml-latin1", "yaml", Buffer.from("password: caf\u00e9", "latin1")],
  ["json-latin1", "json", Buffer.from('{"password":"caf\u00e9"}', "latin1")],
  [
    "json-truncated-utf8",
    "json",
    Buffer.concat([Buffer.from('{"a":"'), Buffer.from([0xe2, 0x82]), Buffer.from('"}')]),
  ],
  ["yaml-surrogate-bytes", "yaml", Buffer.concat([Buffer.from("a: "), Buffer.from([0xed, 0xb0, 0x80])])],
);
binaries.push(["lone-surrogate", "json", Buffer.from('{"a":"\\ud800"}')]);
for (const [id, format, bytes] of binaries) {
  add({
    id: `body:putConfig:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: `/v1/machines/corpus/put/config?format=${format}`,
    headers: { ...bearer("ADMIN"), "content-type": "application/octet-stream" },
    bodyBase64: bytes.toString("base64"),
    expect: lenient.has(id) ? [200, 201, 400] : [400],
  });
}
// Pre-encrypted uploads that are not well-formed SOPS.
const sopsMeta = (over: Record<string, unknown> = {}) => ({
  age: [
    {
      recipient: "age1qqqq",
      enc: "-----BEGIN AGE ENCRYPTED FILE-----\nx\n-----END AGE ENCRYPTED FILE-----\n",
    },
  ],
  lastmodified: "2026-01-01T00:00:00Z",
  mac: "ENC[AES256_GCM,data:AAAA,iv:AAAAAAAAAAAAAAAAAAAAAA==,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]",
  version: "3.9.0",
  ...over,
});
const ENC = "ENC[AES256_GCM,data:AAAA,iv:AAAAAAAAAAAAAAAAAAAAAA==,tag:AAAAAAAAAAAAAAAAAAAAAA==,type:str]";
const preJson: [string, unknown][] = [
  ["plaintext-data", { data: "db-password={{CANARY}}" }],
  ["plaintext-with-sops", { data: "db-password={{CANARY}}", sops: sopsMeta() }],
  ["mac-garbage", { data: ENC, sops: sopsMeta({ mac: "garbage" }) }],
  ["mac-number", { data: ENC, sops: sopsMeta({ mac: 5 }) }],
  ["mac-missing", { data: ENC, sops: sopsMeta({ mac: undefined }) }],
  ["enc-garbage", { data: ENC, sops: sopsMeta({ age: [{ recipient: "age1qqqq", enc: "garbage" }] }) }],
  ["shamir-99", { data: ENC, sops: sopsMeta({ shamir_threshold: 99 }) }],
  ["key-groups-numbers", { data: ENC, sops: sopsMeta({ key_groups: [[1, 2]] }) }],
  ["key-groups-string", { data: ENC, sops: sopsMeta({ key_groups: "x" }) }],
  ["extra-plaintext-key", { data: ENC, extra: "{{CANARY}}", sops: sopsMeta() }],
  ["data-number", { data: 12, sops: sopsMeta() }],
  ["data-object", { data: { x: "{{CANARY}}" }, sops: sopsMeta() }],
  ["sops-string", { data: ENC, sops: "x" }],
  ["sops-array", { data: ENC, sops: [] }],
  ["sops-null", { data: ENC, sops: null }],
  ["no-keys", { data: ENC, sops: sopsMeta({ age: [] }) }],
  ["version-bad", { data: ENC, sops: sopsMeta({ version: "banana" }) }],
  ["version-number", { data: ENC, sops: sopsMeta({ version: 3 }) }],
  ["lastmodified-bad", { data: ENC, sops: sopsMeta({ lastmodified: "yesterday" }) }],
  ["enc-bad-type", { data: ENC.replace("type:str", "type:banana"), sops: sopsMeta() }],
  ["enc-bad-iv", { data: ENC.replace("iv:AAAAAAAAAAAAAAAAAAAAAA==", "iv:!!"), sops: sopsMeta() }],
  ["enc-unclosed", { data: "ENC[AES256_GCM,data:AAAA", sops: sopsMeta() }],
  ["regex-redos", { data: ENC, sops: sopsMeta({ encrypted_regex: "(a+)+$" }) }],
  ["regex-invalid", { data: ENC, sops: sopsMeta({ encrypted_regex: "(" }) }],
  ["array-root", [1, 2]],
  ["kms-bad", { data: ENC, sops: sopsMeta({ kms: [{ arn: "x", enc: "!!" }] }) }],
  ["unknown-meta", { data: ENC, sops: sopsMeta({ banana: "{{CANARY}}" }) }],
  ["nested-deep", { data: ENC, sops: sopsMeta(), x: JSON.parse(nested(200, '{"a":', "}")) as unknown }],
];
for (const [id, doc] of preJson) {
  add({
    id: `body:putConfig:sops-json:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: "/v1/machines/corpus/put/config",
    headers: { ...bearer("ADMIN"), "content-type": "application/sops+json" },
    body: JSON.stringify(doc),
    expect: [400],
  });
}
for (const [id, body] of [
  ["not-json", "this is {{CANARY}}"],
  ["empty", ""],
  ["deep", nested(400, "[", "]")],
  ["truncated", '{"data":"{{CANARY}}","sops":{'],
  ["charset", '{"data":"{{CANARY}}"}'],
] as const) {
  add({
    id: `body:putConfig:sops-json:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: "/v1/machines/corpus/put/config",
    headers: {
      ...bearer("ADMIN"),
      "content-type": id === "charset" ? "application/sops+json; charset=utf-8" : "application/sops+json",
    },
    body,
    expect: [400],
  });
}
for (const [id, body] of [
  ["plaintext", "password: {{CANARY}}"],
  ["sops-scalar", "password: {{CANARY}}\nsops: 5"],
  [
    "sops-plain",
    `password: {{CANARY}}\nsops:\n  version: 3.9.0\n  mac: garbage\n  lastmodified: "2026-01-01T00:00:00Z"`,
  ],
  ["garbage", "\u0000\u0001\u0002{{CANARY}}"],
  ["bomb", `${bomb(7)}\nsops: {version: 3.9.0}`],
  ["deep", `${nested(400, "[", "]")}`],
  ["empty", ""],
  ["json-in-yaml", '{"password": "{{CANARY}}"}'],
] as const) {
  add({
    id: `body:putConfig:sops-yaml:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: "/v1/machines/corpus/put/config",
    headers: { ...bearer("ADMIN"), "content-type": "application/sops+yaml" },
    body,
    expect: [400],
  });
}
// Pre-encrypted uploads whose bytes are not UTF-8 text.
for (const [id, ct, bytes] of [
  [
    "json-invalid-utf8",
    "application/sops+json",
    Buffer.concat([Buffer.from('{"data":"'), Buffer.from([0xff, 0xc3]), Buffer.from('","sops":{}}')]),
  ],
  [
    "yaml-invalid-utf8",
    "application/sops+yaml",
    Buffer.concat([Buffer.from("a: "), Buffer.from([0xff, 0xc3]), Buffer.from("\nsops: {}")]),
  ],
  ["json-utf16", "application/sops+json", Buffer.from('{"data":"x","sops":{}}', "utf16le")],
  [
    "random-bytes",
    "application/sops+json",
    Buffer.from(Array.from({ length: 512 }, (_, i) => (i * 7919 + 13) % 256)),
  ],
] as const) {
  add({
    id: `body:putConfig:sops-bytes:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: "/v1/machines/corpus/put/config",
    headers: { ...bearer("ADMIN"), "content-type": ct },
    bodyBase64: bytes.toString("base64"),
    expect: [400],
  });
}
// Content types, sizes and plaintext that is fine (a publish succeeds: the positive control).
for (const [id, ct, body, expect] of [
  ["text-ok", "text/plain", "plain payload {{CANARY}}", [200, 201]],
  ["octet-ok", "application/octet-stream", "bytes {{CANARY}}", [200, 201]],
  ["no-ct-ok", "", "bytes {{CANARY}}", [200, 201]],
  ["json-ct-no-format", "application/json", '{"a":"{{CANARY}}"}', [200, 201]],
  ["weird-ct", "application/x-banana; q=9; charset=ebcdic", "x {{CANARY}}", [200, 201, 400, 415]],
  ["ct-params", "text/plain;;;;=;", "x {{CANARY}}", [200, 201, 400, 415]],
  ["sops-xml", "application/sops+xml", "<a>{{CANARY}}</a>", [200, 201, 400, 415]],
  ["sops-json-upper", "APPLICATION/SOPS+JSON", '{"data":"{{CANARY}}"}', [400]],
  ["ct-long", `text/${"p".repeat(4000)}`, "x {{CANARY}}", [200, 201, 400, 415]],
  ["too-large", "text/plain", `${"x".repeat(70_000)}{{CANARY}}`, [413]],
  ["too-large-sops", "application/sops+json", `{"data":"${"x".repeat(70_000)}{{CANARY}}"}`, [413]],
  ["yaml-ok", "text/plain", "a: {{CANARY}}", [200, 201]],
] as const) {
  const format = id === "yaml-ok" ? "?format=yaml" : "";
  add({
    id: `body:putConfig:ct:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: `/v1/machines/corpus/put/config${format}`,
    headers: { ...bearer("ADMIN"), ...(ct ? { "content-type": ct } : {}) },
    body,
    expect: [...expect],
  });
}

// 5. Preconditions.
for (const [id, headers, expect] of [
  ["if-match-empty", { "if-match": "" }, [200, 400]],
  ["if-match-star", { "if-match": "*" }, [400]],
  ["if-match-list", { "if-match": '"a", "b"' }, [400]],
  ["if-match-bogus", { "if-match": '"bogus"' }, [412]],
  ["if-match-weak", { "if-match": 'W/"bogus"' }, [412]],
  ["if-match-unquoted", { "if-match": "bogus" }, [412]],
  ["if-match-long", { "if-match": `"${"e".repeat(8000)}"` }, [400, 412]],
  ["if-match-slash", { "if-match": '"../../etc/passwd"' }, [412]],
  ["if-none-match-etag", { "if-none-match": '"abc"' }, [400]],
  ["if-none-match-list", { "if-none-match": "*, *" }, [400]],
  ["if-none-match-star-exists", { "if-none-match": "*" }, [412]],
  ["both", { "if-match": '"a"', "if-none-match": "*" }, [400]],
  ["if-match-whitespace", { "if-match": "   " }, [200, 400]],
] as const) {
  add({
    id: `precondition:putConfig:${id}`,
    route: "putConfig",
    transport: "fetch",
    method: "PUT",
    path: "/v1/machines/corpus/cas/config",
    headers: { ...bearer("ADMIN"), "content-type": "text/plain", ...headers },
    body: "cas {{CANARY}}",
    // An empty If-Match is no condition to an HTTP stack that drops empty headers: a plain replace then.
    expect: [...expect],
  });
}
for (const [id, inm, expect] of [
  ["current", "{{M0ETAG}}", [304]],
  ["bogus", '"bogus"', [200]],
  ["star", "*", [200, 304]],
  ["list", '"a", {{M0ETAG}}', [200, 304]],
  ["long", `"${"e".repeat(8000)}"`, [200]],
  ["weak", "W/{{M0ETAG}}", [200, 304]],
] as const) {
  add({
    id: `precondition:getConfig:${id}`,
    route: "getConfig",
    transport: "fetch",
    method: "GET",
    path: `/v1/machines/${M0}/config`,
    headers: { ...bearer("READER"), "if-none-match": inm },
    expect: [...expect],
  });
}
for (const [id, value] of [
  ["nul", "\u0000"],
  ["cr", '"a"\r'],
  ["utf8", '"\u00c3\u00a9"'],
] as const) {
  add({
    id: `precondition-raw:putConfig:${id}`,
    route: "putConfig",
    transport: "raw",
    raw: raw(
      [
        "PUT /v1/machines/corpus/cas/config HTTP/1.1",
        "Host: localhost",
        "Authorization: Bearer {{ADMIN}}",
        "Content-Type: text/plain",
        `If-Match: ${value}`,
        "Content-Length: {{LEN}}",
        "Connection: close",
      ],
      "cas {{CANARY}}",
    ),
    expect: [400, 412],
  });
}

// 6. Status posts (the machine's own token).
const statusBodies: [string, string, number[]][] = [
  ["phase-published", '{"phase":"published"}', [400]],
  ["phase-upper", '{"phase":"RUNNING"}', [400]],
  ["phase-empty", '{"phase":""}', [400]],
  ["phase-unknown", '{"phase":"{{CANARY}}"}', [400]],
  ["phase-number", '{"phase":5}', [400]],
  ["phase-null", '{"phase":null}', [400]],
  ["phase-array", '{"phase":["running"]}', [400]],
  ["phase-object", '{"phase":{"x":1}}', [400]],
  ["phase-missing", '{"message":"{{CANARY}}"}', [400]],
  ["phase-nul", '{"phase":"running\\u0000"}', [400]],
  ["phase-space", '{"phase":" running"}', [400]],
  ["exit-string", '{"phase":"failed","exitCode":"1"}', [400]],
  ["exit-float", '{"phase":"failed","exitCode":1.5}', [400]],
  ["exit-big", '{"phase":"failed","exitCode":2147483648}', [400]],
  ["exit-small", '{"phase":"failed","exitCode":-2147483649}', [400]],
  ["exit-huge", '{"phase":"failed","exitCode":1e400}', [400]],
  ["exit-null", '{"phase":"failed","exitCode":null}', [400]],
  ["exit-bool", '{"phase":"failed","exitCode":true}', [400]],
  ["exit-array", '{"phase":"failed","exitCode":[1]}', [400]],
  ["attempt-negative", '{"phase":"fetching","attempt":-1}', [400]],
  ["attempt-float", '{"phase":"fetching","attempt":1.5}', [400]],
  ["attempt-string", '{"phase":"fetching","attempt":"1"}', [400]],
  ["attempt-big", '{"phase":"fetching","attempt":1000001}', [400]],
  ["attempt-null", '{"phase":"fetching","attempt":null}', [400]],
  ["attempt-unsafe", '{"phase":"fetching","attempt":9007199254740993}', [400]],
  ["message-long", JSON.stringify({ phase: "running", message: `${"m".repeat(4097)}{{CANARY}}` }), [400]],
  ["message-number", '{"phase":"running","message":5}', [400]],
  ["message-object", '{"phase":"running","message":{"a":"{{CANARY}}"}}', [400]],
  [
    "message-bytes",
    JSON.stringify({ phase: "running", message: `${"\u20ac".repeat(2000)}{{CANARY}}` }),
    [400],
  ],
  ["output-long", JSON.stringify({ phase: "running", output: `${"o".repeat(16_385)}{{CANARY}}` }), [400]],
  ["output-bytes", JSON.stringify({ phase: "running", output: `${"\u20ac".repeat(6000)}{{CANARY}}` }), [400]],
  ["output-array", '{"phase":"running","output":["{{CANARY}}"]}', [400]],
  ["unknown-field", '{"phase":"running","token":"{{CANARY}}"}', [400]],
  ["unknown-field-name", '{"phase":"running","{{CANARY}}":1}', [400]],
  ["proto", '{"phase":"running","__proto__":{"admin":true}}', [400]],
  ["constructor", '{"phase":"running","constructor":{"prototype":{}}}', [400]],
  ["array-body", '["running"]', [400]],
  ["string-body", '"running"', [400]],
  ["number-body", "5", [400]],
  ["null-body", "null", [400]],
  ["empty-object", "{}", [400]],
  ["empty-body", "", [400]],
  ["truncated", '{"phase":"running","message":"{{CANARY}}', [400]],
  ["trailing-garbage", '{"phase":"running"}{{CANARY}}', [400]],
  ["deep", nested(300, '{"a":', "}"), [400]],
  ["very-deep", nested(20_000, "[", "]"), [400, 413]],
  ["dup-phase", '{"phase":"running","phase":"published"}', [400]],
  ["huge", JSON.stringify({ phase: "running", message: "x".repeat(70_000) }), [400, 413]],
  ["ok-running", '{"phase":"running","message":"corpus ok","attempt":1}', [200]],
  ["ok-failed", '{"phase":"failed","exitCode":-1,"output":"corpus out"}', [200]],
  ["ok-fetching", '{"phase":"fetching","attempt":0}', [200]],
];
for (const [id, body, expect] of statusBodies) {
  add({
    id: `body:postStatus:${id}`,
    route: "postStatus",
    transport: "fetch",
    method: "POST",
    path: `/v1/machines/${M0}/status`,
    headers: { ...bearer("MACHINE"), ...JSON_CT },
    body,
    expect,
  });
}
for (const [id, ct, expect] of [
  ["text-plain", "text/plain", [400, 415]],
  ["form", "application/x-www-form-urlencoded", [400, 415]],
  ["yaml", "application/yaml", [400, 415]],
  ["none", "", [400, 415]],
  ["multipart", "multipart/form-data; boundary=x", [400, 415]],
  ["json-latin1", "application/json; charset=latin1", [200, 400, 415]],
  ["json-garbage-param", "application/json;;;x", [200, 400, 415]],
  ["jsonish", "application/jsonx", [400, 415]],
] as const) {
  add({
    id: `ct:postStatus:${id}`,
    route: "postStatus",
    transport: "fetch",
    method: "POST",
    path: `/v1/machines/${M0}/status`,
    headers: { ...bearer("MACHINE"), ...(ct ? { "content-type": ct } : {}) },
    body: '{"phase":"running","message":"ct"}',
    expect: [...expect],
  });
}
for (const [id, bytes] of [
  [
    "invalid-utf8",
    Buffer.concat([
      Buffer.from('{"phase":"running","message":"'),
      Buffer.from([0xff, 0xfe, 0xc3]),
      Buffer.from('"}'),
    ]),
  ],
  ["utf16", Buffer.from('{"phase":"running"}', "utf16le")],
  ["bom", Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"phase":"running"}')])],
  ["nul-bytes", Buffer.from('{"phase":"running"}\u0000\u0000')],
] as const) {
  add({
    id: `body:postStatus:${id}`,
    route: "postStatus",
    transport: "fetch",
    method: "POST",
    path: `/v1/machines/${M0}/status`,
    headers: { ...bearer("MACHINE"), ...JSON_CT },
    bodyBase64: bytes.toString("base64"),
    // A BOM is stripped by some JSON readers, bytes that are not UTF-8 replaced: never a 5xx.
    expect: id === "bom" || id === "invalid-utf8" ? [200, 400] : [400],
  });
}

// 7. Operations routes, unknown routes and methods.
for (const path of ["/healthz", "/readyz", "/metrics", "/docs", "/docs/openapi.json", "/docs/openapi.yaml"]) {
  add({ id: `ops:ok`, route: path, transport: "fetch", method: "GET", path, expect: [200] });
  add({
    id: `ops:query`,
    route: path,
    transport: "fetch",
    method: "GET",
    path: `${path}?x=%zz&y[]=1`,
    expect: [200, 400],
  });
  add({
    id: `ops:bad-token`,
    route: path,
    transport: "fetch",
    method: "GET",
    path,
    headers: { authorization: "Bearer nope" },
    expect: [200, 401],
  });
  for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
    add({
      id: `ops:method:${method}`,
      route: path,
      transport: "fetch",
      method,
      path,
      headers: { "content-type": "application/json" },
      body: method === "DELETE" ? undefined : '{"x":1}',
      // 400: DELETE with a JSON content type and no body is refused before routing.
      expect: [400, 404, 405],
    });
  }
  add({
    id: "ops:dup-host",
    route: path,
    transport: "raw",
    raw: raw([`GET ${path} HTTP/1.1`, "Host: localhost", "Host: evil.example", "Connection: close"]),
    expect: [400],
  });
}
// The fleet page: the page, its assets (hashed names only), nothing else under /ui/.
add({ id: "page:get", route: "/", transport: "fetch", method: "GET", path: "/", expect: [200] });
for (const path of [
  "/ui/",
  "/ui/app.js",
  "/ui/app-0000000000000000.js",
  "/ui/%2e%2e%2fapp.ts",
  "/ui/__proto__",
]) {
  add({ id: "page:asset", route: "/", transport: "fetch", method: "GET", path, expect: [404] });
}
add({
  id: "page:dup-host",
  route: "/",
  transport: "raw",
  raw: raw(["GET / HTTP/1.1", "Host: localhost", "Host: evil.example", "Connection: close"]),
  expect: [400],
});
for (const path of [
  "/v1",
  "/v1/",
  "/v2/machines",
  "/v1/machines/corpus/m0",
  "/v1/machines/corpus/m0/secret",
  "/v1/machines/corpus/m0/config/extra",
  "/v1/machines/corpus/m0/config/",
  "/v1/machines/corpus/m0/status/extra",
  "/v1/machines/corpus",
  "/V1/MACHINES",
  "/v1/events/x",
  "/favicon.ico",
  "/docs/openapi.xml",
  "/.env",
  "/v1/machines/corpus/m0/config;jsessionid=1",
  "/v1/machines/corpus/m0/config%00",
  "/v1/machines/corpus/m0/config%2F",
  "/healthz/",
]) {
  add({
    id: "unknown:get",
    route: "unknown",
    transport: "fetch",
    method: "GET",
    path,
    headers: bearer("ADMIN"),
    expect: [400, 404],
  });
}
for (const target of [
  "/../../etc/passwd",
  "/v1/machines/../../../etc/passwd/config",
  "//v1/machines",
  "/v1//machines/corpus/m0/config",
  "/v1/machines/corpus/m0/./config",
  "/v1/machines/corpus/m0/../m1/config",
  "/%2e%2e/%2e%2e/etc/passwd",
  "/v1/machines/corpus/m0/config?%",
  "/v1/machines/corpus/m0/config#frag",
  "/\\v1\\machines",
  "*",
  "http://evil.example/healthz",
  "healthz",
  "/v1/machines/corpus/m0/config\u00ff",
  `/${"a/".repeat(4000)}`,
  `/v1/machines?namespace=${"n".repeat(15_000)}`,
]) {
  add({
    id: "unknown:raw-target",
    route: "unknown",
    transport: "raw",
    raw: raw([
      `GET ${target} HTTP/1.1`,
      "Host: localhost",
      "Authorization: Bearer {{READER}}",
      "Connection: close",
    ]),
    // An absolute-form target is legal HTTP (it names /healthz), a lone `?%` or a `#fragment`
    // after a real route leaves that route (a reader may fetch); the rest are refused or unknown.
    expect:
      target.startsWith("http://") || target.endsWith("?%") || target.endsWith("#frag")
        ? [200, 400, 404]
        : [400, 404, 414, 431],
  });
}
for (const method of ["PATCH", "OPTIONS", "TRACE", "PROPFIND", "MKCOL", "LOCK", "SEARCH", "PURGE", "HEAD"]) {
  for (const path of [
    `/v1/machines/${M0}/config`,
    `/v1/machines/${M0}/status`,
    "/v1/machines",
    "/v1/events",
  ]) {
    add({
      id: `unknown:method:${method}`,
      route: "unknown",
      transport: "raw",
      raw: raw([
        `${method} ${path} HTTP/1.1`,
        "Host: localhost",
        "Authorization: Bearer {{ADMIN}}",
        "Connection: close",
      ]),
      expect: [400, 404, 405, 501],
    });
  }
}
for (const line of [
  "FOO /healthz HTTP/1.1",
  "get /healthz HTTP/1.1",
  "G\u00c9T /healthz HTTP/1.1",
  "CONNECT localhost:443 HTTP/1.1",
  "GET\t/healthz HTTP/1.1",
]) {
  add({
    id: "unknown:method-raw",
    route: "unknown",
    transport: "raw",
    raw: raw([line, "Host: localhost", "Connection: close"]),
    expect: [400, 404, 405, 501],
  });
}

// 8. Framing on raw sockets (request line, headers, lengths, chunks, Expect, Host).
const F = (id: string, text: string, expect: number[], extra: Partial<CorpusCase> = {}) =>
  add({ id: `framing:${id}`, route: "framing", transport: "raw", raw: text, expect, ...extra });
F("garbage", "GARBAGE\r\n\r\n", [400]);
F("only-crlf", "\r\n\r\n\r\n\r\nxx\r\n\r\n", [400]);
F("method-only", "GET\r\n\r\n", [400]);
// Node's parser takes these three leniently (HTTP/0.9 style, a 2.0 version on HTTP/1 framing,
// two spaces): an answer either way, with no secret.
F("http09", "GET /healthz\r\n\r\n", [200, 400]);
F("http2-line", "GET /healthz HTTP/2.0\r\nHost: x\r\n\r\n", [200, 400, 505]);
F("http9", "GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", [400, 505]);
F("http-lower", "GET /healthz http/1.1\r\nHost: x\r\n\r\n", [400]);
F("extra-token", "GET /healthz HTTP/1.1 extra\r\nHost: x\r\n\r\n", [400]);
F("double-space", "GET  /healthz HTTP/1.1\r\nHost: x\r\n\r\n", [200, 400]);
F("nul-in-line", "GET /heal\u0000thz HTTP/1.1\r\nHost: x\r\n\r\n", [400]);
F("lf-only", "GET /healthz HTTP/1.1\nHost: x\nConnection: close\n\n", [200, 400]);
F("cr-only", "GET /healthz HTTP/1.1\rHost: x\r\r", [400]);
F("no-host", "GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", [400]);
F(
  "no-host-v1",
  `GET /v1/machines/${M0}/status HTTP/1.1\r\nAuthorization: Bearer {{ADMIN}}\r\nConnection: close\r\n\r\n`,
  [400],
);
F("http10-no-host", "GET /healthz HTTP/1.0\r\n\r\n", [200]);
F("empty-host", "GET /healthz HTTP/1.1\r\nHost:\r\nConnection: close\r\n\r\n", [200, 400]);
F("host-junk", "GET /healthz HTTP/1.1\r\nHost: a b c\r\nConnection: close\r\n\r\n", [200, 400]);
F("host-long", `GET /healthz HTTP/1.1\r\nHost: ${"h".repeat(5000)}\r\nConnection: close\r\n\r\n`, [200, 400]);
F("host-dup", "GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n", [400]);
F(
  "host-userdata",
  'GET /v1/machines/corpus/ud/userdata?format=cloud-init HTTP/1.1\r\nHost: evil"example\r\nAuthorization: Bearer {{ADMIN}}\r\nConnection: close\r\n\r\n',
  [200, 400, 404],
);
// The stub's service URL comes from Host when `publicUrl` is unset: hostile ones must be
// refused or rendered safely, never a 5xx (the token minted for a 200 is the scratch machine's).
for (const host of [
  "a';reboot;'b",
  "$(id)",
  "x`id`",
  "localhost:99999",
  "[::1",
  "evil.example/p?q#f",
  "user@host",
  "a\\b",
  "h%0aX: y",
  "\u00e9vil.example",
  "-oProxyCommand=x",
  "",
]) {
  for (const format of ["cloud-init", "ignition", "powershell"]) {
    F(
      `host-userdata-${format}`,
      `GET /v1/machines/corpus/ud/userdata?format=${format} HTTP/1.1\r\nHost: ${host}\r\nAuthorization: Bearer {{ADMIN}}\r\nConnection: close\r\n\r\n`,
      [200, 400],
    );
  }
}
F("header-no-colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n", [400]);
F("header-space-name", "GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header: banana\r\n\r\n", [400]);
F("header-space-before-colon", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A : b\r\n\r\n", [400]);
F("header-obs-fold", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\r\n  folded\r\n\r\n", [400]);
F("header-nul", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\u0000c\r\n\r\n", [400]);
F("header-empty-name", "GET /healthz HTTP/1.1\r\nHost: x\r\n: value\r\n\r\n", [400]);
F("header-utf8-name", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-\u00c3\u00a9: v\r\n\r\n", [400]);
F("header-huge", `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(20_000)}\r\n\r\n`, [431]);
F(
  "headers-many",
  `GET /healthz HTTP/1.1\r\nHost: x\r\n${Array.from({ length: 2000 }, (_, i) => `X-H${i}: v`).join("\r\n")}\r\n\r\n`,
  [431],
);
F(
  "headers-many-small",
  `GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${Array.from({ length: 150 }, (_, i) => `X-H${i}: v`).join("\r\n")}\r\n\r\n`,
  [200, 431],
);
F("url-huge", `GET /healthz?${"q".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, [414, 431]);
F("expect-banana", "GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: banana\r\n\r\n", [417]);
F(
  "expect-banana-put",
  "PUT /v1/machines/corpus/put/config HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {{ADMIN}}\r\nExpect: banana\r\nContent-Length: 4\r\n\r\nabcd",
  [417],
);
F("expect-empty", "GET /healthz HTTP/1.1\r\nHost: x\r\nExpect:\r\nConnection: close\r\n\r\n", [200, 417]);
F(
  "expect-continue-no-auth",
  "PUT /v1/machines/corpus/put/config HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
  [401],
);
const put = (lines: string[], body: string) =>
  [
    "PUT /v1/machines/corpus/put/config HTTP/1.1",
    "Host: x",
    "Authorization: Bearer {{ADMIN}}",
    "Content-Type: text/plain",
    ...lines,
  ].join("\r\n") +
  "\r\n\r\n" +
  body;
F("cl-abc", put(["Content-Length: abc"], "x"), [400]);
F("cl-negative", put(["Content-Length: -1"], "x"), [400]);
F("cl-plus", put(["Content-Length: +5"], "hello"), [400]);
F("cl-hex", put(["Content-Length: 0x5"], "hello"), [400]);
F("cl-space", put(["Content-Length: 5 5"], "hello"), [400]);
F("cl-dup-differ", put(["Content-Length: 5", "Content-Length: 6"], "hello!"), [400]);
F("cl-dup-same", put(["Content-Length: 5", "Content-Length: 5"], "hello"), [400]);
F("cl-list", put(["Content-Length: 5, 5"], "hello"), [400]);
F("cl-huge", put(["Content-Length: 99999999999999999999999"], "x"), [400, 413]);
F("cl-over-limit", put(["Content-Length: 10000000"], "x"), [413]);
F("cl-and-te", put(["Content-Length: 5", "Transfer-Encoding: chunked"], "5\r\nhello\r\n0\r\n\r\n"), [400]);
F("te-gzip", put(["Transfer-Encoding: gzip"], "hello"), [400, 411, 415, 501]);
F("te-chunked-gzip", put(["Transfer-Encoding: chunked, gzip"], "5\r\nhello\r\n0\r\n\r\n"), [400, 501]);
F(
  "te-dup",
  put(["Transfer-Encoding: chunked", "Transfer-Encoding: chunked"], "5\r\nhello\r\n0\r\n\r\n"),
  [200, 201, 400],
);
F("te-bad-chunk-size", put(["Transfer-Encoding: chunked"], "zz\r\nhello\r\n0\r\n\r\n"), [400]);
F("te-chunk-neg", put(["Transfer-Encoding: chunked"], "-5\r\nhello\r\n0\r\n\r\n"), [400]);
F(
  "te-chunk-overflow",
  put(["Transfer-Encoding: chunked"], "ffffffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
  [400, 413],
);
F(
  "te-chunk-over-limit",
  put(["Transfer-Encoding: chunked"], `20000\r\n${"x".repeat(0x20000)}\r\n0\r\n\r\n`),
  [413],
);
F("te-chunk-no-crlf", put(["Transfer-Encoding: chunked"], "5\r\nhelloXX0\r\n\r\n"), [400]);
F("te-chunk-ext-bad", put(["Transfer-Encoding: chunked"], "5;\u0000=x\r\nhello\r\n0\r\n\r\n"), [400]);
F(
  "te-ok-control",
  put(["Transfer-Encoding: chunked", "Connection: close"], "5\r\nhello\r\n0\r\n\r\n"),
  [200, 201],
);
F("ct-dup", put(["Content-Type: application/sops+json", "Content-Length: 2"], "{}"), [400]);
F(
  "ct-dup-status",
  `POST /v1/machines/${M0}/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {{MACHINE}}\r\nContent-Type: application/json\r\nContent-Type: text/plain\r\nContent-Length: 19\r\n\r\n{"phase":"running"}`,
  [400],
);
F(
  "post-no-length",
  `POST /v1/machines/${M0}/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {{MACHINE}}\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n`,
  [400, 411, 415],
);
F("smuggle-cl-te-case", put(["Content-Length: 4", "Transfer-Encoding: CHUNKED"], "0\r\n\r\n"), [400]);
F("smuggle-te-space", put(["Transfer-Encoding : chunked", "Content-Length: 4"], "0\r\n\r\n"), [400]);
F("smuggle-te-tab", put(["Transfer-Encoding:\tchunked", "Content-Length: 4"], "0\r\n\r\n"), [400]);
F(
  "pipelined-after-bad",
  `GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: zz\r\n\r\nGET /v1/machines/${M0}/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {{ADMIN}}\r\n\r\n`,
  [400],
);
F("binary-garbage", "\u0016\u0003\u0001\u0002\u0000\u0001\u0000\u00fc\u0003\u0003", [400], {});
F("tls-hello-on-plain", "\u0016\u0003\u0001\u0000\u00a5\u0001\u0000\u0000\u00a1\u0003\u0003\r\n\r\n", [400]);
F("http2-preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", [400, 505]);
F(
  "upgrade-h2c",
  "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n",
  [200, 400],
);
F(
  "upgrade-websocket",
  `GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {{ADMIN}}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`,
  [200, 400, 426],
  { stream: true },
);
// Truncated requests: the server must answer 408 within its small configured timeouts.
F("truncated-body-put", put(["Content-Length: 1000"], "only ten b"), [408], { hold: true });
F(
  "truncated-body-status",
  `POST /v1/machines/${M0}/status HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {{MACHINE}}\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n{"phase":`,
  [408],
  { hold: true },
);
F("truncated-chunked", put(["Transfer-Encoding: chunked"], "5\r\nhello\r\n"), [408], { hold: true });
F("truncated-headers", "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Partial: ab", [408], { hold: true });
F("truncated-line", "GET /heal", [408], { hold: true });
F(
  "truncated-unauth-body",
  "PUT /v1/machines/corpus/put/config HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc",
  [401, 408],
  { hold: true },
);
F(
  "truncated-token-body",
  'PUT /v1/machines/corpus/put/config HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {{ADMIN}}\r\nContent-Type: application/sops+json\r\nContent-Length: 900\r\n\r\n{"data":"{{CANARY}}',
  [408],
  { hold: true },
);
F(
  "truncated-expect",
  "PUT /v1/machines/corpus/put/config HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {{ADMIN}}\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n",
  [408],
  { hold: true },
);

const out = fileURLToPath(new URL("./http-bad-input.json", import.meta.url));
writeFileSync(out, `${JSON.stringify({ generatedBy: "test/corpus/make-http-corpus.ts", cases }, null, 1)}\n`);
console.log(`${cases.length} cases -> ${out}`);
