/**
 * A model of go-yaml v3's event emitter (emitterc.go) for the events sops produces: block
 * mappings and sequences, empty flow `{}`/`[]`, scalars, and head/line/foot/tail comments.
 * sops output is whatever this state machine prints, quirks included (blank line after a foot
 * comment, comments left pending until the next state that writes them), so the model keeps
 * the same states and the same pending-comment fields rather than a simpler recursive printer.
 * Line width is unlimited, as go-yaml v3 sets it; no anchors; the only tags are !!binary and !!merge.
 */
import { BootsealError } from "../../../errors.ts";
import { CappedText } from "./output.ts";
import { type Analysis, analyzeScalar, isBreak, isPrintable, type ScalarStyle } from "./yaml-scalar.ts";

export type { ScalarStyle };

export type EmitEvent =
  | { readonly t: "docStart" }
  | { readonly t: "docEnd" }
  | { readonly t: "mapStart"; readonly head: string; readonly tail: string }
  | { readonly t: "mapEnd"; readonly tail: string; readonly line: string; readonly foot: string }
  | { readonly t: "seqStart"; readonly head: string }
  | { readonly t: "seqEnd"; readonly line: string; readonly foot: string }
  | {
      readonly t: "scalar";
      readonly value: string;
      readonly style: ScalarStyle;
      /** "" or a secondary tag go-yaml keeps on output: "binary" (non-UTF-8 bytes), "merge" (`<<`). */
      readonly tag: string;
      readonly head: string;
      readonly line: string;
      readonly foot: string;
      readonly tail: string;
    };

type State =
  | "docStart"
  | "docContent"
  | "docEnd"
  | "flowSeqFirst"
  | "flowMapFirst"
  | "blockSeqFirst"
  | "blockSeqItem"
  | "blockMapFirstKey"
  | "blockMapKey"
  | "blockMapSimpleValue"
  | "blockMapValue";

const ESCAPES: Record<number, string> = {
  0: "0",
  7: "a",
  8: "b",
  9: "t",
  10: "n",
  11: "v",
  12: "f",
  13: "r",
  27: "e",
  34: '"',
  92: "\\",
  133: "N",
  160: "_",
  8232: "L",
  8233: "P",
};

/** Array.from(s).length (code points), without building the array. */
function codePointLength(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n--;
        i++;
      }
    }
  }
  return n;
}

/** Any character isBreak accepts. */
const HAS_BREAK = /[\n\r\u0085\u2028\u2029]/;

/** Runs the events through the emitter model and returns the text. */
export function emitEvents(events: readonly EmitEvent[], bestIndent: number): string {
  const out = new CappedText("yaml");
  const best = bestIndent < 2 || bestIndent > 9 ? 2 : bestIndent;
  let indent = -1;
  const indents: number[] = [];
  const states: State[] = [];
  let state: State = "docStart";
  let first = true;
  let flowLevel = 0;
  let simpleKeyContext = false;
  let column = 0;
  let whitespace = true;
  let indention = true;
  let footIndent = -1;
  let headComment = "";
  let lineComment = "";
  let footComment = "";
  let tailComment = "";
  let keyLineComment = "";
  let analysis: Analysis = analyzeScalar("");
  let style: ScalarStyle = "plain";

  const put = (s: string): void => {
    out.push(s);
    column += codePointLength(s);
  };
  const putBreak = (): void => {
    out.push("\n");
    column = 0;
    indention = true;
  };
  const writeBreak = (c: string): void => {
    if (c === "\n") putBreak();
    else {
      out.push(c);
      column = 0;
      indention = true;
    }
  };
  const writeIndent = (): void => {
    const want = Math.max(indent, 0);
    if (!indention || column > want || (column === want && !whitespace)) putBreak();
    if (footIndent === want) putBreak();
    if (column < want) put(" ".repeat(want - column));
    whitespace = true;
    footIndent = -1;
  };
  const writeIndicator = (
    s: string,
    needWhitespace: boolean,
    isWhitespace: boolean,
    isIndention: boolean,
  ): void => {
    if (needWhitespace && !whitespace) put(" ");
    put(s);
    whitespace = isWhitespace;
    indention = indention && isIndention;
  };
  const writeComment = (comment: string): void => {
    let breaks = false;
    let pound = false;
    for (const c of comment) {
      if (isBreak(c)) {
        writeBreak(c);
        breaks = true;
        pound = false;
      } else {
        if (breaks) writeIndent();
        if (!pound) {
          if (c !== "#") put("# ");
          pound = true;
        }
        put(c);
        indention = false;
        breaks = false;
      }
    }
    if (!breaks) putBreak();
    whitespace = true;
  };
  const processHeadComment = (): void => {
    if (tailComment) {
      writeIndent();
      writeComment(tailComment);
      tailComment = "";
      footIndent = Math.max(indent, 0);
    }
    if (!headComment) return;
    writeIndent();
    writeComment(headComment);
    headComment = "";
  };
  const processLineComment = (linebreak = false): void => {
    if (!lineComment) {
      if (linebreak) putBreak();
      return;
    }
    if (!whitespace) put(" ");
    writeComment(lineComment);
    lineComment = "";
  };
  const processFootComment = (): void => {
    if (!footComment) return;
    writeIndent();
    writeComment(footComment);
    footComment = "";
    footIndent = Math.max(indent, 0);
  };
  const increaseIndent = (flow: boolean): void => {
    indents.push(indent);
    if (indent < 0) indent = flow ? best : 0;
    else if (states[states.length - 1] === "blockSeqItem") indent += 2;
    else indent = best * Math.floor((indent + best) / best);
  };
  const popIndent = (): void => {
    indent = indents.pop() ?? -1;
  };
  const popState = (): void => {
    state = states.pop() ?? "docEnd";
  };

  /** go-yaml's write_plain / write_single_quoted loop, character by character (values with breaks). */
  const writeLines = (value: string, single: boolean): void => {
    let breaks = false;
    for (const c of value) {
      if (isBreak(c)) {
        if (!breaks && c === "\n") putBreak();
        writeBreak(c);
        breaks = true;
      } else {
        if (breaks) writeIndent();
        put(single && c === "'" ? "''" : c);
        indention = false;
        breaks = false;
      }
    }
  };

  const writeScalar = (ev: Extract<EmitEvent, { t: "scalar" }>): void => {
    const value = ev.value;
    if (style === "plain") {
      if (value !== "" && !whitespace) put(" ");
      // Without line breaks, the character loop amounts to writing the value at once.
      if (HAS_BREAK.test(value)) writeLines(value, false);
      else if (value !== "") put(value);
      if (value !== "") whitespace = false;
      indention = false;
    } else if (style === "single") {
      writeIndicator("'", true, false, false);
      if (HAS_BREAK.test(value)) writeLines(value, true);
      else if (value !== "") put(value.replaceAll("'", "''"));
      writeIndicator("'", false, false, false);
      whitespace = false;
      indention = false;
    } else if (style === "double") {
      writeIndicator('"', true, false, false);
      // go-yaml's is_bom looks at the start of the value, not at the current character.
      const bom = value.startsWith("\ufeff");
      for (const c of value) {
        if (!isPrintable(c) || bom || isBreak(c) || c === '"' || c === "\\") {
          const cp = c.codePointAt(0) ?? 0;
          const short = ESCAPES[cp];
          if (short !== undefined) put(`\\${short}`);
          else if (cp <= 0xff) put(`\\x${cp.toString(16).toUpperCase().padStart(2, "0")}`);
          else if (cp <= 0xffff) put(`\\u${cp.toString(16).toUpperCase().padStart(4, "0")}`);
          else put(`\\U${cp.toString(16).toUpperCase().padStart(8, "0")}`);
        } else put(c);
      }
      writeIndicator('"', false, false, false);
      whitespace = false;
      indention = false;
    } else {
      writeIndicator("|", true, false, false);
      const chars = Array.from(value);
      if (chars[0] === " " || isBreak(chars[0])) writeIndicator(String(best), false, false, false);
      let chomp = "";
      if (chars.length === 0 || !isBreak(chars[chars.length - 1])) chomp = "-";
      else if (chars.length === 1 || isBreak(chars[chars.length - 2])) chomp = "+";
      if (chomp) writeIndicator(chomp, false, false, false);
      processLineComment(true);
      whitespace = true;
      let breaks = true;
      for (const c of chars) {
        if (isBreak(c)) {
          writeBreak(c);
          breaks = true;
        } else {
          if (breaks) writeIndent();
          put(c);
          indention = false;
          breaks = false;
        }
      }
    }
  };

  const emitNode = (events: readonly EmitEvent[], index: number, simpleKey: boolean): void => {
    const ev = events[index];
    simpleKeyContext = simpleKey;
    if (ev?.t === "scalar") {
      style = ev.style;
      if (simpleKeyContext && analysis.multiline) style = "double";
      if (style === "plain") {
        if ((flowLevel > 0 && !analysis.flowPlain) || (flowLevel === 0 && !analysis.blockPlain))
          style = "single";
        if (ev.value === "" && (flowLevel > 0 || simpleKeyContext)) style = "single";
      }
      if (style === "single" && !analysis.single) style = "double";
      if (style === "literal" && (!analysis.block || flowLevel > 0 || simpleKeyContext)) style = "double";
      if (ev.tag) {
        if (!whitespace) put(" ");
        put(`!!${ev.tag}`);
        whitespace = false;
        indention = false;
      }
      increaseIndent(true);
      writeScalar(ev);
      popIndent();
      popState();
    } else if (ev?.t === "seqStart") {
      state = flowLevel > 0 || events[index + 1]?.t === "seqEnd" ? "flowSeqFirst" : "blockSeqFirst";
    } else if (ev?.t === "mapStart") {
      state = flowLevel > 0 || events[index + 1]?.t === "mapEnd" ? "flowMapFirst" : "blockMapFirstKey";
    } else {
      throw new BootsealError("INTERNAL", "yaml emitter: expected a node");
    }
  };

  const isSimpleKey = (ev: EmitEvent | undefined, next: EmitEvent | undefined): boolean => {
    if (ev?.t === "scalar") {
      if (analysis.multiline) return false;
      const tagLength = ev.tag ? "!!".length + ev.tag.length : 0;
      return tagLength + Buffer.byteLength(ev.value, "utf8") <= 128;
    }
    if (ev?.t === "mapStart") return next?.t === "mapEnd";
    if (ev?.t === "seqStart") return next?.t === "seqEnd";
    return false;
  };

  events.forEach((ev, index) => {
    // yaml_emitter_analyze_event: comments carried by the event become pending.
    if ("head" in ev && ev.head) headComment = ev.head;
    if ("line" in ev && ev.line) lineComment = ev.line;
    if ("foot" in ev && ev.foot) footComment = ev.foot;
    if ("tail" in ev && ev.tail) tailComment = ev.tail;
    if (ev.t === "scalar") analysis = analyzeScalar(ev.value);

    switch (state) {
      case "docStart": {
        if (ev.t !== "docStart") throw new BootsealError("INTERNAL", "yaml emitter: expected a document");
        if (!first) {
          writeIndent();
          writeIndicator("---", true, false, false);
          writeIndent();
        }
        first = false;
        state = "docContent";
        return;
      }
      case "docContent": {
        states.push("docEnd");
        processHeadComment();
        emitNode(events, index, false);
        processLineComment();
        processFootComment();
        return;
      }
      case "docEnd": {
        footIndent = 0;
        processFootComment();
        footIndent = -1;
        writeIndent();
        state = "docStart";
        return;
      }
      case "flowSeqFirst":
      case "flowMapFirst": {
        const isSeq = state === "flowSeqFirst";
        writeIndicator(isSeq ? "[" : "{", true, true, false);
        increaseIndent(true);
        flowLevel++;
        if (ev.t !== (isSeq ? "seqEnd" : "mapEnd")) {
          throw new BootsealError("INTERNAL", "yaml emitter: non-empty flow collection");
        }
        if (!isSeq) processHeadComment();
        flowLevel--;
        popIndent();
        if (isSeq && column === 0) writeIndent();
        writeIndicator(isSeq ? "]" : "}", false, false, false);
        processLineComment();
        processFootComment();
        popState();
        return;
      }
      case "blockSeqFirst":
      case "blockSeqItem": {
        if (state === "blockSeqFirst") increaseIndent(false);
        if (ev.t === "seqEnd") {
          popIndent();
          popState();
          return;
        }
        processHeadComment();
        writeIndent();
        writeIndicator("-", true, false, true);
        states.push("blockSeqItem");
        emitNode(events, index, false);
        processLineComment();
        processFootComment();
        return;
      }
      case "blockMapFirstKey":
      case "blockMapKey": {
        if (state === "blockMapFirstKey") increaseIndent(false);
        processHeadComment();
        if (ev.t === "mapEnd") {
          popIndent();
          popState();
          return;
        }
        writeIndent();
        if (lineComment) {
          keyLineComment = lineComment;
          lineComment = "";
        }
        if (isSimpleKey(ev, events[index + 1])) {
          states.push("blockMapSimpleValue");
          emitNode(events, index, true);
        } else {
          writeIndicator("?", true, false, true);
          states.push("blockMapValue");
          emitNode(events, index, false);
        }
        return;
      }
      case "blockMapSimpleValue":
      case "blockMapValue": {
        if (state === "blockMapSimpleValue") writeIndicator(":", false, false, false);
        else {
          writeIndent();
          writeIndicator(":", true, false, true);
        }
        if (keyLineComment) {
          if (ev.t === "scalar") {
            if (!lineComment) {
              lineComment = keyLineComment;
              keyLineComment = "";
            }
          } else if (ev.t === "mapStart" || ev.t === "seqStart") {
            [lineComment, keyLineComment] = [keyLineComment, lineComment];
            processLineComment();
            [lineComment, keyLineComment] = [keyLineComment, lineComment];
          }
        }
        states.push("blockMapKey");
        emitNode(events, index, false);
        processLineComment();
        processFootComment();
        return;
      }
    }
  });
  return out.join();
}
