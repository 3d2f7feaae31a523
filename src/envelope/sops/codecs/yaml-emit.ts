/**
 * Tree -> YAML text, as sops' YAML store writes it: branch items become go-yaml nodes the way
 * stores/yaml/store.go attaches comments (comments before the first item are the collection's
 * head, before a key the key's head, inline ones the next value's line comment, trailing ones
 * the last key's or item's foot), then go-yaml's encoder turns nodes into events
 * (a key's foot travels as the next key's "tail") and ./yaml-emitter.ts prints them.
 */
import { BootsealError } from "../../../errors.ts";
import type { Branch, Comment, Mapping, Scalar, Sequence, Value } from "../document.ts";
import { type EmitEvent, emitEvents } from "./yaml-emitter.ts";
import { analyzeScalar, canUsePlain, formatGoFloat, type ScalarStyle, settleStyle } from "./yaml-scalar.ts";

interface YNode {
  readonly kind: "map" | "seq" | "scalar";
  readonly value: string;
  readonly style: ScalarStyle;
  readonly tag: string;
  head: string;
  line: string;
  foot: string;
  readonly content: YNode[];
}

const joinComments = (texts: readonly string[]): string => `#${texts.join("\n#")}`;

function addHead(node: YNode, texts: readonly string[]): void {
  if (texts.length === 0) return;
  const c = joinComments(texts);
  node.head = node.head ? `${c}\n${node.head}` : c;
}
function addFoot(node: YNode, texts: readonly string[]): void {
  if (texts.length === 0) return;
  const c = joinComments(texts);
  node.foot = node.foot ? `${node.foot}\n${c}` : c;
}
function addLine(node: YNode, texts: readonly string[]): void {
  if (texts.length === 0) return;
  const c = joinComments(texts);
  node.line = node.line ? `${node.line}\n${c}` : c;
}

function collection(kind: "map" | "seq"): YNode {
  return { kind, value: "", style: "plain", tag: "", head: "", line: "", foot: "", content: [] };
}

/** go-yaml encodeBase64: 70-character lines, each ending in a newline once there are several. */
function base64Lines(bytes: Uint8Array): string {
  const b64 = Buffer.from(bytes).toString("base64");
  const lines = Math.floor(b64.length / 70) + 1;
  if (lines === 1) return b64;
  let out = "";
  for (let i = 0; i < b64.length; i += 70) out += `${b64.slice(i, i + 70)}\n`;
  return out;
}

/**
 * sops builds each scalar node with Node.Encode, which prints the value alone and parses it
 * back: the style go-yaml settled on there (plain, quoted or literal) is the style requested
 * in the document.
 */
function stringNode(text: string | Uint8Array): YNode {
  let value: string;
  let binary = false;
  if (text === "<<") {
    // go-yaml reads a plain `<<` as the merge key and writes the string back tagged.
    return {
      kind: "scalar",
      value: text,
      style: "plain",
      tag: "merge",
      head: "",
      line: "",
      foot: "",
      content: [],
    };
  }
  if (typeof text === "string") value = text;
  else {
    try {
      value = new TextDecoder("utf-8", { fatal: true }).decode(text);
    } catch {
      value = base64Lines(text);
      binary = true;
    }
  }
  let requested: ScalarStyle;
  if (value.includes("\n")) requested = "literal";
  else if (binary || canUsePlain(value)) requested = "plain";
  else requested = "double";
  const style = settleStyle(requested, analyzeScalar(value));
  return {
    kind: "scalar",
    value,
    style,
    tag: binary ? "binary" : "",
    head: "",
    line: "",
    foot: "",
    content: [],
  };
}

function scalarNode(s: Scalar): YNode {
  const plain = (value: string): YNode => ({
    kind: "scalar",
    value,
    style: "plain",
    tag: "",
    head: "",
    line: "",
    foot: "",
    content: [],
  });
  switch (s.type) {
    case "str":
      return stringNode(s.value);
    case "bytes":
      return stringNode(s.value);
    case "int":
      return plain(s.value.toString());
    case "float":
      return plain(formatGoFloat(s.value));
    case "bool":
      return plain(s.value ? "true" : "false");
    case "time":
      return plain(s.value);
    case "null":
      return plain("null");
  }
}

function valueNode(v: Value): YNode {
  if (v.kind === "map") return mapNode(v);
  if (v.kind === "seq") return seqNode(v);
  return scalarNode(v);
}

/** sops appendTreeBranch. */
function mapNode(m: Mapping): YNode {
  const node = collection("map");
  let heads: string[] = [];
  let inlines: string[] = [];
  let beginning = true;
  for (const item of m.items) {
    if (item.kind === "comment") {
      (item.inline ? inlines : heads).push(item.text);
      continue;
    }
    if (beginning) {
      addHead(node, heads);
      heads = [];
      beginning = false;
    }
    const key = stringNode(item.key);
    addHead(key, heads);
    heads = [];
    const value = valueNode(item.value);
    addLine(value, inlines);
    inlines = [];
    node.content.push(key, value);
  }
  trailing(node, beginning, [...heads, ...inlines], 2);
  return node;
}

/** sops appendSequence. */
function seqNode(s: Sequence): YNode {
  const node = collection("seq");
  let heads: string[] = [];
  let inlines: string[] = [];
  let beginning = true;
  for (const item of s.items) {
    if (item.kind === "comment") {
      (item.inline ? inlines : heads).push((item as Comment).text);
      continue;
    }
    if (beginning) {
      addHead(node, heads);
      heads = [];
      beginning = false;
    }
    const child = valueNode(item);
    addHead(child, heads);
    heads = [];
    addLine(child, inlines);
    inlines = [];
    node.content.push(child);
  }
  trailing(node, beginning, [...heads, ...inlines], 1);
  return node;
}

/** Comments after the last item: the collection's head if it has no item, else the last key's or item's foot. */
function trailing(node: YNode, beginning: boolean, texts: readonly string[], stride: number): void {
  if (texts.length === 0) return;
  const last = node.content[node.content.length - stride];
  if (beginning || !last) addHead(node, texts);
  else addFoot(last, texts);
}

/** go-yaml encoder.node: the events for one node; a key's foot is moved to the next key as its tail. */
function nodeEvents(node: YNode, tail: string, out: EmitEvent[]): void {
  if (node.kind === "scalar") {
    out.push({
      t: "scalar",
      value: node.value,
      style: node.style,
      tag: node.tag,
      head: node.head,
      line: node.line,
      foot: node.foot,
      tail,
    });
    return;
  }
  if (node.kind === "seq") {
    out.push({ t: "seqStart", head: node.head });
    for (const child of node.content) nodeEvents(child, "", out);
    out.push({ t: "seqEnd", line: node.line, foot: node.foot });
    return;
  }
  out.push({ t: "mapStart", head: node.head, tail });
  let pending = "";
  for (let i = 0; i + 1 < node.content.length; i += 2) {
    const key = node.content[i]!;
    const value = node.content[i + 1]!;
    const foot = key.foot;
    nodeEvents(foot ? { ...key, foot: "" } : key, pending, out);
    pending = foot;
    nodeEvents(value, "", out);
  }
  out.push({ t: "mapEnd", tail: pending, line: node.line, foot: node.foot });
}

/** Serialise branches as sops does (one `---`-separated document per branch). */
export function emitYaml(branches: readonly Branch[], indent: number): string {
  if (!Number.isInteger(indent) || indent < 0) {
    throw new BootsealError("USAGE", "yaml: indentation must be a non-negative integer");
  }
  const events: EmitEvent[] = [];
  for (const branch of branches) {
    events.push({ t: "docStart" });
    nodeEvents(mapNode(branch), "", events);
    events.push({ t: "docEnd" });
  }
  // go-yaml's encoder treats an indent of 0 as its default, 4.
  return emitEvents(events, indent === 0 ? 4 : indent);
}
