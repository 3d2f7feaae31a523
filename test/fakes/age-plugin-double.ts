/**
 * TEST DOUBLE of an age plugin, "double", for the recipient side of the age plugin protocol:
 * the one real plugin built here (age-plugin-batchpass, scripts/peers/age-plugin-batchpass.sh)
 * has no recipient encoding, and no other plugin installs here. It speaks the real state
 * machines (recipient-v1, identity-v1) over stdin/stdout, so the real sops's plugin client
 * (filippo.io/age/plugin) and bootseal's drive it the same way.
 *
 * The "key" is a symmetric 32-byte secret K: recipient `age1double1…` and identity
 * `AGE-PLUGIN-DOUBLE-1…` both carry K (Bech32). A file key is wrapped as the stanza
 * `double <base64 nonce>` with body AES-256-GCM(K, nonce, file key) || tag. No security
 * intended: it only exists to test the protocol.
 *
 *   node test/fakes/age-plugin-double.ts --keygen            prints "recipient identity"
 *   node test/fakes/age-plugin-double.ts --age-plugin=recipient-v1 | --age-plugin=identity-v1
 *
 * A test puts an executable `age-plugin-double` (a sh wrapper that execs this file with the
 * repo's Node) in a directory on PATH.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { argv, exit, stdin, stdout } from "node:process";
import { createInterface } from "node:readline";

const CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const GEN = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

function polymod(values: number[]): number {
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GEN[i] as number;
  }
  return chk;
}

function toWords(data: Uint8Array): number[] {
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const b of data) {
    acc = (acc << 8) | b;
    bits += 8;
    while (bits >= 5) {
      bits -= 5;
      out.push((acc >> bits) & 31);
    }
  }
  if (bits > 0) out.push((acc << (5 - bits)) & 31);
  return out;
}

function bech32Encode(hrp: string, data: Uint8Array): string {
  const lower = hrp.toLowerCase();
  const words = toWords(data);
  const hrpx = [...lower].map((c) => c.charCodeAt(0));
  const mod =
    polymod([...hrpx.map((c) => c >> 5), 0, ...hrpx.map((c) => c & 31), ...words, 0, 0, 0, 0, 0, 0]) ^ 1;
  const check = Array.from({ length: 6 }, (_, i) => (mod >> (5 * (5 - i))) & 31);
  const s = `${lower}1${[...words, ...check].map((w) => CHARSET[w]).join("")}`;
  return hrp === lower ? s : s.toUpperCase();
}

/** The data of a Bech32 string (checksum not checked: the client did). */
function bech32Data(s: string): Buffer {
  const lower = s.toLowerCase();
  const words = [...lower.slice(lower.lastIndexOf("1") + 1, -6)].map((c) => CHARSET.indexOf(c));
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const w of words) {
    acc = (acc << 5) | w;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
  }
  return Buffer.from(out);
}

interface Stanza {
  type: string;
  args: string[];
  body: Buffer;
}

const lines = createInterface({ input: stdin, crlfDelay: Number.POSITIVE_INFINITY })[Symbol.asyncIterator]();

async function line(): Promise<string> {
  const next = await lines.next();
  if (next.done) exit(1);
  return next.value as string;
}

async function readStanza(): Promise<Stanza> {
  const head = await line();
  const [arrow, type, ...args] = head.split(" ");
  if (arrow !== "->" || !type) exit(1);
  const b64: string[] = [];
  for (;;) {
    const l = await line();
    b64.push(l);
    if (l.length < 64) break;
  }
  return { type: type as string, args, body: Buffer.from(b64.join(""), "base64") };
}

function writeStanza(type: string, args: string[], body: Buffer = Buffer.alloc(0)): void {
  const b64 = body.toString("base64").replace(/=+$/, "");
  const out: string[] = [];
  for (let i = 0; i < b64.length; i += 64) out.push(b64.slice(i, i + 64));
  if (b64.length % 64 === 0) out.push("");
  stdout.write(`-> ${[type, ...args].join(" ")}\n${out.join("\n")}\n`);
}

async function expectOk(): Promise<void> {
  const s = await readStanza();
  if (s.type !== "ok") exit(1);
}

async function expectType(type: string): Promise<void> {
  const s = await readStanza();
  if (s.type !== type) {
    process.stderr.write(`age-plugin-double: expected ${type}, got ${s.type}\n`);
    exit(1);
  }
}

/**
 * AGE_PLUGIN_DOUBLE_CHATTY=1: before its answer the double shows a message (wants ok), asks
 * for a secret (wants fail: no terminal) and sends an unknown stanza (wants unsupported).
 */
async function chat(): Promise<void> {
  if (process.env.AGE_PLUGIN_DOUBLE_CHATTY !== "1") return;
  writeStanza("msg", [], Buffer.from("touch the double"));
  await expectType("ok");
  writeStanza("request-secret", [], Buffer.from("PIN?"));
  await expectType("fail");
  writeStanza("double-grease", ["x"]);
  await expectType("unsupported");
}

async function phaseOne(): Promise<Stanza[]> {
  const got: Stanza[] = [];
  for (;;) {
    const s = await readStanza();
    if (s.type === "done") return got;
    got.push(s); // unknown (grease) stanzas are kept and ignored below
  }
}

function wrap(key: Buffer, fileKey: Buffer): Stanza {
  const nonce = randomBytes(12);
  const c = createCipheriv("aes-256-gcm", key, nonce);
  const body = Buffer.concat([c.update(fileKey), c.final(), c.getAuthTag()]);
  return { type: "double", args: [nonce.toString("base64").replace(/=+$/, "")], body };
}

function unwrap(key: Buffer, s: Stanza): Buffer | null {
  if (s.type !== "double" || s.args.length !== 1 || s.body.length < 17) return null;
  try {
    const d = createDecipheriv("aes-256-gcm", key, Buffer.from(s.args[0] as string, "base64"));
    d.setAuthTag(s.body.subarray(s.body.length - 16));
    return Buffer.concat([d.update(s.body.subarray(0, s.body.length - 16)), d.final()]);
  } catch {
    return null;
  }
}

async function recipientV1(): Promise<void> {
  const got = await phaseOne();
  const keys = got.filter((s) => s.type === "add-recipient").map((s) => bech32Data(s.args[0] as string));
  const fileKeys = got.filter((s) => s.type === "wrap-file-key").map((s) => s.body);
  if (keys.length === 0 || fileKeys.length === 0 || keys.some((k) => k.length !== 32)) {
    writeStanza("error", ["internal"], Buffer.from("double: no recipient or file key"));
    await expectOk();
    exit(3);
  }
  await chat();
  for (const [i, fileKey] of fileKeys.entries()) {
    for (const key of keys) {
      const s = wrap(key, fileKey);
      writeStanza("recipient-stanza", [String(i), s.type, ...s.args], s.body);
      await expectOk();
    }
  }
  writeStanza("done", []);
}

async function identityV1(): Promise<void> {
  const got = await phaseOne();
  const keys = got.filter((s) => s.type === "add-identity").map((s) => bech32Data(s.args[0] as string));
  const byFile = new Map<string, Stanza[]>();
  for (const s of got.filter((x) => x.type === "recipient-stanza")) {
    const [file, type, ...args] = s.args;
    byFile.set(file as string, [
      ...(byFile.get(file as string) ?? []),
      { type: type as string, args, body: s.body },
    ]);
  }
  await chat();
  for (const [file, stanzas] of byFile) {
    let found: Buffer | null = null;
    for (const key of keys) for (const s of stanzas) found ??= unwrap(key, s);
    if (found) {
      writeStanza("file-key", [file], found);
      await expectOk();
    }
  }
  writeStanza("done", []);
}

const mode = argv.slice(2).find((a) => a.startsWith("--age-plugin=") || a === "--keygen");
if (mode === "--keygen") {
  const key = randomBytes(32);
  stdout.write(`${bech32Encode("age1double", key)} ${bech32Encode("AGE-PLUGIN-DOUBLE-", key)}\n`);
} else if (mode === "--age-plugin=recipient-v1") {
  await recipientV1();
  exit(0);
} else if (mode === "--age-plugin=identity-v1") {
  await identityV1();
  exit(0);
} else {
  process.stderr.write("usage: age-plugin-double --age-plugin=recipient-v1|identity-v1 | --keygen\n");
  exit(2);
}
