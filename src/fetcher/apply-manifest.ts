/**
 * The --apply manifest: a multi-document YAML stream, one file per document.
 *
 *   path: /etc/kubernetes/bootstrap-kubelet.conf   # absolute, under the allowed roots
 *   content: |                                      # the bytes (a string)
 *     apiVersion: v1
 *   encoding: plain                                 # plain (default) or base64
 *   mode: "0640"                                    # octal, default 0600
 *   owner: root                                     # name or number; default: unchanged (root)
 *   group: kube                                     # name or number; default: owner's group
 *
 * `mode` is always read as octal, written with or without the leading 0 or as 0o640, quoted
 * or not: YAML 1.1 and 1.2 disagree on what a bare 0640 means, so the digits of the source
 * are read, never the number a YAML library made of them. Unknown keys, duplicate paths and
 * anything else malformed refuse the whole manifest, before any file is written. Error
 * messages name the document, the position of a key, the known field names and paths, never
 * content or the text of an unknown key (a mis-indented content line parses as a key, so its
 * text is the secret). At most MAX_MANIFEST_FILES files.
 */
import { isMap, isScalar, LineCounter, parseAllDocuments, type Scalar } from "yaml";
import { boundedTokens, tooDeep, tooDeepAt } from "../envelope/sops/codecs/yaml-limits.ts";
import { BootsealError } from "../errors.ts";
import { displayPath } from "./paths.ts";

/** The most files one manifest may list. */
export const MAX_MANIFEST_FILES = 10_000;

export interface FileSpec {
  /** 1-based position of its document in the stream, for messages. */
  readonly document: number;
  readonly path: string;
  readonly content: Uint8Array;
  readonly mode: number;
  readonly owner?: string;
  readonly group?: string;
}

export const DEFAULT_FILE_MODE = 0o600;

const KEYS = new Set(["path", "content", "encoding", "mode", "owner", "group"]);

function bad(where: string, message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `manifest ${where}: ${message}`);
}

/** "0640", "640", "0o640", 640 (from the source digits): permission bits, at most 07777. */
export function parseMode(raw: string, where: string): number {
  let text = raw.trim();
  if ((text.startsWith('"') && text.endsWith('"')) || (text.startsWith("'") && text.endsWith("'"))) {
    text = text.slice(1, -1).trim();
  }
  const m = /^(?:0o)?([0-7]{1,4})$/i.exec(text);
  // Never the text itself: a mis-indented block could make it content.
  if (!m) throw bad(where, "mode is not an octal mode such as 0640");
  return Number.parseInt(m[1] as string, 8);
}

function stringField(node: unknown, key: string, where: string): string | undefined {
  if (node === undefined || node === null) return undefined;
  if (!isScalar(node)) throw bad(where, `${key} must be a scalar`);
  const v = (node as Scalar).value;
  if (v === null) return undefined;
  if (typeof v === "string") return v;
  if (typeof v === "number" && key !== "content") return String(v);
  throw bad(where, `${key} must be a string`);
}

function decodeBase64(text: string, where: string): Uint8Array {
  const compact = text.replace(/\s+/g, "");
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(compact) || compact.length % 4 !== 0) {
    throw bad(where, "content is not valid base64");
  }
  return new Uint8Array(Buffer.from(compact, "base64"));
}

/** Parses the manifest; throws BAD_INPUT naming the document and key of the first problem. */
export function parseManifest(bytes: Uint8Array): FileSpec[] {
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  // Millions of empty documents (`---` lines) would cost gigabytes to parse: count the
  // markers first. A marker only counts at the start of a line, where no content can be.
  let markers = 0;
  for (const _ of text.matchAll(/^(?:---|\.\.\.)(?=\s|$)/gm)) {
    if (++markers > 2 * MAX_MANIFEST_FILES + 2) throw bad("", `more than ${MAX_MANIFEST_FILES} documents`);
  }
  // The same nesting bound as the YAML codec, checked on a bounded parse first: a megabyte of
  // `[` would otherwise cost the machine CPU and stack in the full parse below.
  const lines = new LineCounter();
  const deep = tooDeepAt(boundedTokens(text, lines));
  if (deep !== undefined) throw tooDeep(lines.linePos(deep).line);
  const docs = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: false });
  if (!Array.isArray(docs)) throw bad("", "not a YAML document stream");
  const specs: FileSpec[] = [];
  const seen = new Set<string>();
  docs.forEach((doc, i) => {
    const where = `document ${i + 1}`;
    const first = doc.errors[0];
    // yaml's own messages quote the source, which is secret here: code and position only.
    if (first) throw bad(where, `YAML error ${first.code} at offset ${first.pos[0]}`);
    const root = doc.contents;
    if (root === null || (isScalar(root) && root.value === null)) return; // empty document
    if (!isMap(root)) throw bad(where, "must be a mapping with path and content");
    const fields = new Map<string, unknown>();
    root.items.forEach((pair, k) => {
      const key = isScalar(pair.key) ? pair.key.value : pair.key;
      if (typeof key !== "string" || !KEYS.has(key)) {
        // The key's text may be a content line that lost its indentation: position only.
        throw bad(
          where,
          `key ${k + 1} of ${root.items.length} is an unknown key (the keys are ${[...KEYS].join(", ")})`,
        );
      }
      fields.set(key, pair.value);
    });
    const path = stringField(fields.get("path"), "path", where);
    if (path === undefined || path === "") throw bad(where, "path is missing");
    const at = `${where} (${displayPath(path)})`;
    if (seen.has(path)) throw bad(at, "the path appears twice");
    seen.add(path);
    const contentNode = fields.get("content");
    const content = stringField(contentNode, "content", at);
    if (content === undefined) throw bad(at, 'content is missing (use "" for an empty file)');
    const encoding = stringField(fields.get("encoding"), "encoding", at) ?? "plain";
    if (encoding !== "plain" && encoding !== "base64") throw bad(at, "encoding must be plain or base64");
    const modeNode = fields.get("mode");
    let mode = DEFAULT_FILE_MODE;
    if (modeNode !== undefined && modeNode !== null) {
      if (!isScalar(modeNode) || !modeNode.range) throw bad(at, "mode must be a scalar such as 0640");
      mode = parseMode(text.slice(modeNode.range[0], modeNode.range[1]), at);
    }
    const owner = stringField(fields.get("owner"), "owner", at);
    const group = stringField(fields.get("group"), "group", at);
    if (specs.length >= MAX_MANIFEST_FILES) throw bad(where, `more than ${MAX_MANIFEST_FILES} files`);
    specs.push({
      document: i + 1,
      path,
      content: encoding === "base64" ? decodeBase64(content, at) : new TextEncoder().encode(content),
      mode,
      ...(owner !== undefined ? { owner } : {}),
      ...(group !== undefined ? { group } : {}),
    });
  });
  if (specs.length === 0) throw bad("", "lists no files");
  return specs;
}
