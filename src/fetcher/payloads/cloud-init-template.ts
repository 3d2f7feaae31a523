/**
 * cloud-init 22.4.2's templater for its own NTP templates (/etc/cloud/templates/*.tmpl on the
 * machine): a `## template:jinja` first line, then Jinja with trim_blocks, rendered with lists
 * of names. Only the Jinja those templates use is rendered: text, `{{ expr }}`, `{% if %}`,
 * `{% for x in expr %}` and their ends, `-` white-space control; expressions are a name,
 * `name|list`, `a + b` and `a or b`. Anything else refuses the template (BAD_INPUT): a
 * template bootseal cannot render as Jinja would is never written half right.
 */
import { BootsealError } from "../../errors.ts";

export type TemplateValue = string | readonly string[];

function bad(message: string): BootsealError {
  return new BootsealError("BAD_INPUT", `cloud-config: ntp template: ${message}`);
}

type Token = { kind: "text"; text: string } | { kind: "expr" | "stmt"; body: string };

/** Splits into text and tags, applying `-` trimming and trim_blocks (the newline after `%}`). */
function tokenize(source: string): Token[] {
  const out: Token[] = [];
  const tag = /\{\{(-?)([\s\S]*?)(-?)\}\}|\{%(-?)([\s\S]*?)(-?)%\}|\{#/g;
  let at = 0;
  let trimNext = false;
  let blockEnded = false;
  for (let m = tag.exec(source); m !== null; m = tag.exec(source)) {
    if (m[0] === "{#") throw bad("a Jinja comment");
    let text = source.slice(at, m.index);
    if (blockEnded && text.startsWith("\n")) text = text.slice(1);
    if (trimNext) text = text.replace(/^\s+/, "");
    const isExpr = m[2] !== undefined;
    if ((isExpr ? m[1] : m[4]) === "-") text = text.replace(/\s+$/, "");
    if (text !== "") out.push({ kind: "text", text });
    out.push(
      isExpr
        ? { kind: "expr", body: (m[2] as string).trim() }
        : { kind: "stmt", body: (m[5] as string).trim() },
    );
    trimNext = (isExpr ? m[3] : m[6]) === "-";
    blockEnded = !isExpr;
    at = tag.lastIndex;
  }
  let rest = source.slice(at);
  if (blockEnded && rest.startsWith("\n")) rest = rest.slice(1);
  if (trimNext) rest = rest.replace(/^\s+/, "");
  if (rest !== "") out.push({ kind: "text", text: rest });
  return out;
}

function evaluate(expr: string, scope: ReadonlyMap<string, TemplateValue>): TemplateValue {
  const or = expr.split(/\s+or\s+/);
  if (or.length > 1) {
    for (const part of or) {
      const v = evaluate(part, scope);
      if (v.length > 0) return v;
    }
    return evaluate(or.at(-1) as string, scope);
  }
  const sum = expr.split("+");
  if (sum.length > 1) return sum.flatMap((part) => list(evaluate(part.trim(), scope)));
  const m = /^([A-Za-z_][A-Za-z0-9_]*)\s*(\|\s*list)?$/.exec(expr.trim());
  if (!m) throw bad(`an expression bootseal does not render (${JSON.stringify(expr.slice(0, 40))})`);
  const value = scope.get(m[1] as string);
  if (value === undefined) throw bad(`an undefined name ${JSON.stringify(m[1])}`);
  return m[2] ? list(value) : value;
}

function list(v: TemplateValue): readonly string[] {
  return typeof v === "string" ? [...v] : v;
}

/** Renders the template text after its header, as cloud-init's jinja_render does. */
function renderBody(body: string, params: ReadonlyMap<string, TemplateValue>): string {
  const tokens = tokenize(body);
  let pos = 0;
  const run = (scope: ReadonlyMap<string, TemplateValue>, until: readonly string[]): [string, string] => {
    let out = "";
    while (pos < tokens.length) {
      const t = tokens[pos++] as Token;
      if (t.kind === "text") out += t.text;
      else if (t.kind === "expr") {
        const v = evaluate(t.body, scope);
        if (typeof v !== "string") throw bad("a list printed as text");
        out += v;
      } else if (until.includes(t.body)) return [out, t.body];
      else out += statement(t.body, scope);
    }
    if (until.length > 0) throw bad(`a block without ${until.join(" or ")}`);
    return [out, ""];
  };
  const skip = (until: readonly string[]): string => {
    let depth = 0;
    while (pos < tokens.length) {
      const t = tokens[pos++] as Token;
      if (t.kind !== "stmt") continue;
      if (/^(if|for)\s/.test(t.body)) depth++;
      else if (depth > 0 && /^end(if|for)$/.test(t.body)) depth--;
      else if (depth === 0 && until.includes(t.body)) return t.body;
    }
    throw bad(`a block without ${until.join(" or ")}`);
  };
  const statement = (stmt: string, scope: ReadonlyMap<string, TemplateValue>): string => {
    const ifm = /^if\s+(.+)$/.exec(stmt);
    if (ifm) {
      if (evaluate(ifm[1] as string, scope).length > 0) {
        const [text, end] = run(scope, ["else", "endif"]);
        if (end === "else") skip(["endif"]);
        return text;
      }
      return skip(["else", "endif"]) === "else" ? run(scope, ["endif"])[0] : "";
    }
    const form = /^for\s+([A-Za-z_][A-Za-z0-9_]*)\s+in\s+(.+)$/.exec(stmt);
    if (form) {
      const items = list(evaluate(form[2] as string, scope));
      const start = pos;
      let out = "";
      if (items.length === 0) skip(["endfor"]);
      for (const item of items) {
        pos = start;
        out += run(new Map([...scope, [form[1] as string, item]]), ["endfor"])[0];
      }
      return out;
    }
    throw bad(`a statement bootseal does not render (${JSON.stringify(stmt.slice(0, 40))})`);
  };
  return run(params, [])[0];
}

/**
 * templater.render_from_file: the first line names the renderer (`## template:jinja`); Jinja
 * drops one trailing newline and cloud-init adds it back when the text had one.
 */
export function renderCloudInitTemplate(text: string, params: ReadonlyMap<string, TemplateValue>): string {
  const nl = text.indexOf("\n");
  const ident = nl === -1 ? text : text.slice(0, nl);
  const rest = nl === -1 ? "" : text.slice(nl + 1);
  const type = /^##\s*template:\s*([\w-]+)/i.exec(ident.trim())?.[1]?.toLowerCase();
  if (type !== "jinja") throw bad("not a `## template:jinja` template");
  // Jinja drops one trailing newline of the source (keep_trailing_newline=False).
  const rendered = renderBody(rest.replace(/\n$/, ""), params);
  return rendered + (rest.endsWith("\n") ? "\n" : "");
}
