/**
 * age plugins (the age plugin protocol, C2SP age-plugin.md, as filippo.io/age/plugin's client
 * speaks it for sops 3.13): a recipient `age1<name>1…` or an identity `AGE-PLUGIN-<NAME>-1…`
 * is handed to the binary `age-plugin-<name>` on PATH, run as `--age-plugin=recipient-v1`
 * (wrap) or `--age-plugin=identity-v1` (unwrap). Like that client, everything is written
 * first (phase 1), then the plugin's stanzas are answered until its `done` (phase 2).
 * Interaction is refused as sops does without a terminal: `msg` is shown on stderr,
 * `request-secret`/`request-public`/`confirm` get `fail`, anything else `unsupported`.
 */
import type { Identity, Recipient, Stanza } from "age-encryption";
import { BootsealError } from "../../src/errors.ts";

type Env = Readonly<Record<string, string | undefined>>;

// --- Bech32 (BIP 173 checksum, any length, one case), as age's internal/bech32 reads it ---

const CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l";
const GENERATOR = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

function polymod(values: number[]): number {
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GENERATOR[i] as number;
  }
  return chk;
}

/** The human-readable part and the data bytes; null when `s` is not valid Bech32. */
export function bech32Decode(s: string): { hrp: string; data: Uint8Array } | null {
  if (s !== s.toLowerCase() && s !== s.toUpperCase()) return null;
  const lower = s.toLowerCase();
  const at = lower.lastIndexOf("1");
  if (at < 1 || at + 7 > lower.length) return null;
  const hrp = lower.slice(0, at);
  const words: number[] = [];
  for (const c of lower.slice(at + 1)) {
    const w = CHARSET.indexOf(c);
    if (w < 0) return null;
    words.push(w);
  }
  const expanded = [...hrp].map((c) => c.charCodeAt(0));
  if (expanded.some((c) => c < 33 || c > 126)) return null;
  const check = [...expanded.map((c) => c >> 5), 0, ...expanded.map((c) => c & 31), ...words];
  if (polymod(check) !== 1) return null;
  // 5-bit words to bytes; leftover bits must be zero padding.
  const out: number[] = [];
  let acc = 0;
  let bits = 0;
  for (const w of words.slice(0, -6)) {
    acc = (acc << 5) | w;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      out.push((acc >> bits) & 0xff);
    }
  }
  if (bits >= 5 || (acc & ((1 << bits) - 1)) !== 0) return null;
  return { hrp: s === lower ? hrp : hrp.toUpperCase(), data: Uint8Array.from(out) };
}

const PLUGIN_NAME = /^[A-Za-z0-9+\-._]+$/;

/** The plugin name of `age1<name>1…`, or a BAD_INPUT with the Go client's reason. */
export function pluginRecipientName(recipient: string): string {
  const decoded = bech32Decode(recipient);
  if (decoded === null) throw new BootsealError("BAD_INPUT", `age: invalid recipient encoding: ${recipient}`);
  const name = decoded.hrp.slice("age1".length);
  if (!decoded.hrp.startsWith("age1") || !PLUGIN_NAME.test(name)) {
    throw new BootsealError("BAD_INPUT", `age: invalid plugin name ${JSON.stringify(name)}: ${recipient}`);
  }
  return name;
}

/** The plugin name of `AGE-PLUGIN-<NAME>-1…` (lower case), or null when it is not one. */
export function pluginIdentityName(identity: string): string | null {
  const decoded = bech32Decode(identity);
  if (decoded === null) return null;
  const hrp = decoded.hrp.toUpperCase();
  if (!hrp.startsWith("AGE-PLUGIN-") || !hrp.endsWith("-")) return null;
  const name = hrp.slice("AGE-PLUGIN-".length, -1).toLowerCase();
  return PLUGIN_NAME.test(name) ? name : null;
}

// --- stanzas: "-> type args…", then the body in base64 lines of 64, the last one shorter ---

interface WireStanza {
  readonly type: string;
  readonly args: string[];
  readonly body: Uint8Array;
}

function encodeStanza(type: string, args: readonly string[], body: Uint8Array = new Uint8Array()): string {
  const b64 = Buffer.from(body).toString("base64").replace(/=+$/, "");
  const lines: string[] = [];
  for (let i = 0; i < b64.length; i += 64) lines.push(b64.slice(i, i + 64));
  if (b64.length % 64 === 0) lines.push("");
  return `-> ${[type, ...args].join(" ")}\n${lines.join("\n")}\n`;
}

/** Reads whole lines from a child's stdout. */
class LineReader {
  private buffered = "";
  private readonly waiting: ((line: string | null) => void)[] = [];
  private readonly lines: string[] = [];
  private ended = false;

  constructor(stream: NodeJS.ReadableStream) {
    stream.setEncoding("latin1");
    stream.on("data", (chunk: string) => {
      this.buffered += chunk;
      let at = this.buffered.indexOf("\n");
      while (at >= 0) {
        this.push(this.buffered.slice(0, at));
        this.buffered = this.buffered.slice(at + 1);
        at = this.buffered.indexOf("\n");
      }
    });
    stream.on("end", () => {
      this.ended = true;
      for (const w of this.waiting.splice(0)) w(null);
    });
  }

  private push(line: string): void {
    const w = this.waiting.shift();
    if (w) w(line);
    else this.lines.push(line);
  }

  next(): Promise<string | null> {
    const line = this.lines.shift();
    if (line !== undefined) return Promise.resolve(line);
    if (this.ended) return Promise.resolve(null);
    return new Promise((resolve) => this.waiting.push(resolve));
  }
}

async function readStanza(reader: LineReader, what: string): Promise<WireStanza> {
  const head = await reader.next();
  if (head === null)
    throw new BootsealError("KEY_UNAVAILABLE", `${what}: the plugin exited without finishing`);
  const m = /^-> (\S+)((?: \S+)*)$/.exec(head);
  if (!m) throw new BootsealError("BAD_INPUT", `${what}: malformed stanza from the plugin`);
  const b64: string[] = [];
  for (;;) {
    const line = await reader.next();
    if (line === null) throw new BootsealError("KEY_UNAVAILABLE", `${what}: the plugin exited mid-stanza`);
    if (line.length > 64 || !/^[A-Za-z0-9+/]*$/.test(line)) {
      throw new BootsealError("BAD_INPUT", `${what}: malformed stanza body from the plugin`);
    }
    b64.push(line);
    if (line.length < 64) break;
  }
  return {
    type: m[1] as string,
    args: (m[2] ?? "").split(" ").filter(Boolean),
    body: new Uint8Array(Buffer.from(b64.join(""), "base64")),
  };
}

type Reply = (type: string, args?: readonly string[], body?: Uint8Array) => void;

/** A plugin request not specific to the phase: shown or refused, as a client without a terminal does. */
function answerInteraction(name: string, s: WireStanza, reply: Reply): void {
  if (s.type === "msg") {
    process.stderr.write(`${name} plugin: ${Buffer.from(s.body).toString("utf8")}\n`);
    reply("ok");
  } else if (s.type === "request-secret" || s.type === "request-public" || s.type === "confirm") {
    reply("fail");
  } else {
    reply("unsupported");
  }
}

/** What a phase handler did with a stanza: "next", "stop" (ends the run), or undefined (not its stanza). */
type Handled = "next" | "stop" | undefined;

/**
 * One run of `age-plugin-<name> --age-plugin=<machine>`: writes `request`, then hands every
 * stanza the plugin sends to `onStanza` (which replies) until `done`. An `error` stanza ends
 * the run with the plugin's message (the plugin exits without `done`); stanzas the handler
 * leaves are interaction (answerInteraction).
 */
async function runPlugin(
  name: string,
  machine: "recipient-v1" | "identity-v1",
  request: string,
  env: Env,
  onStanza: (s: WireStanza, reply: Reply) => Handled,
): Promise<void> {
  const what = `age: ${name} plugin`;
  const { spawn } = await import("node:child_process");
  const child = spawn(`age-plugin-${name}`, [`--age-plugin=${machine}`], {
    env: { ...process.env, ...env },
    stdio: ["pipe", "pipe", "inherit"],
  });
  const started = new Promise<void>((resolve, reject) => {
    child.once("spawn", resolve);
    child.once("error", (err: NodeJS.ErrnoException) =>
      reject(
        new BootsealError(
          err.code === "ENOENT" ? "UNSUPPORTED" : "IO_ERROR",
          `${what}: couldn't start plugin: ${JSON.stringify(name)} plugin not found: age-plugin-${name} is not on PATH`,
          { cause: err },
        ),
      ),
    );
  });
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  child.stdin.on("error", () => {}); // a plugin that exits early: its exit says why
  await started;
  const reply: Reply = (type, args = [], body) => {
    child.stdin.write(encodeStanza(type, args, body));
  };
  try {
    child.stdin.write(request);
    const reader = new LineReader(child.stdout);
    for (;;) {
      const s = await readStanza(reader, what);
      if (s.type === "done") break;
      if (s.type === "error") {
        reply("ok");
        throw new BootsealError("BAD_INPUT", `${what}: ${Buffer.from(s.body).toString("utf8")}`);
      }
      const handled = onStanza(s, reply);
      if (handled === "stop") break;
      if (handled === undefined) answerInteraction(name, s, reply);
    }
  } finally {
    // A plugin that fails outside the protocol ends its stdout early: readStanza said so.
    child.stdin.end();
    await exited;
  }
}

/** A typage Recipient that wraps through the plugin's recipient-v1 state machine. */
export function pluginRecipient(recipient: string, env: Env): Recipient {
  const name = pluginRecipientName(recipient);
  return {
    async wrapFileKey(fileKey: Uint8Array): Promise<Stanza[]> {
      const stanzas: Stanza[] = [];
      let failure: BootsealError | null = null;
      const request =
        encodeStanza("add-recipient", [recipient]) +
        encodeStanza("wrap-file-key", [], fileKey) +
        encodeStanza("extension-labels", []) +
        encodeStanza("done", []);
      await runPlugin(name, "recipient-v1", request, env, (s, reply) => {
        if (s.type === "recipient-stanza") {
          if (s.args.length < 2 || s.args[0] !== "0") {
            failure ??= new BootsealError("BAD_INPUT", `age: ${name} plugin: malformed recipient stanza`);
          } else {
            // typage keeps the stanza type as the first argument.
            stanzas.push({ args: s.args.slice(1), body: s.body });
          }
          reply("ok");
          return failure === null ? "next" : "stop";
        }
        if (s.type === "labels") {
          reply("ok");
          return "next";
        }
        return undefined;
      });
      if (failure) throw failure;
      if (stanzas.length === 0) {
        throw new BootsealError("BAD_INPUT", `age: ${name} plugin: received zero recipient stanzas`);
      }
      return stanzas;
    },
  };
}

/** A typage Identity that unwraps through the plugin's identity-v1 state machine; null: not its file. */
export function pluginIdentity(identity: string, env: Env): Identity {
  const name = pluginIdentityName(identity);
  if (name === null) throw new BootsealError("BAD_INPUT", "age: not a plugin identity");
  return {
    async unwrapFileKey(stanzas: Stanza[]): Promise<Uint8Array | null> {
      let fileKey: Uint8Array | null = null;
      let failure: BootsealError | null = null;
      const request =
        encodeStanza("add-identity", [identity]) +
        stanzas.map((s) => encodeStanza("recipient-stanza", ["0", ...s.args], s.body)).join("") +
        encodeStanza("done", []);
      await runPlugin(name, "identity-v1", request, env, (s, reply) => {
        if (s.type === "file-key") {
          if (s.args.length !== 1 || s.args[0] !== "0" || fileKey !== null) {
            failure ??= new BootsealError("BAD_INPUT", `age: ${name} plugin: malformed file-key stanza`);
          } else {
            fileKey = s.body;
          }
          reply("ok");
          return failure === null ? "next" : "stop";
        }
        return undefined;
      });
      if (failure) throw failure;
      return fileKey;
    },
  };
}
