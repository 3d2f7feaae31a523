/**
 * `bootseal check`'s lines: each check one line, `✓`/`✗`/`!` then its name and what it found,
 * under a heading per section, then a summary. Marks are symbols on a terminal and the words
 * `ok`/`FAIL`/`warn` otherwise, so logs and `grep FAIL` work anywhere. `--json` is the same
 * content as one object.
 */

export type Outcome = "ok" | "warn" | "fail";

export interface CheckLine {
  /** Where the check ran: `service URL` or `config FILE`. */
  readonly section: string;
  readonly name: string;
  readonly outcome: Outcome;
  /** What was found; never a secret. */
  readonly message: string;
}

const SYMBOLS: Readonly<Record<Outcome, string>> = { ok: "✓", warn: "!", fail: "✗" };
const WORDS: Readonly<Record<Outcome, string>> = { ok: "ok  ", warn: "warn", fail: "FAIL" };

export function counts(lines: readonly CheckLine[]): Record<Outcome, number> {
  const out: Record<Outcome, number> = { ok: 0, warn: 0, fail: 0 };
  for (const l of lines) out[l.outcome] += 1;
  return out;
}

export function summaryLine(lines: readonly CheckLine[]): string {
  const c = counts(lines);
  return `${lines.length} checks: ${c.ok} ok, ${c.warn} warning${c.warn === 1 ? "" : "s"}, ${c.fail} failed`;
}

export function textReport(lines: readonly CheckLine[], terminal: boolean): string {
  const marks = terminal ? SYMBOLS : WORDS;
  const width = Math.max(0, ...lines.map((l) => l.name.length));
  const out: string[] = [];
  let section: string | undefined;
  for (const l of lines) {
    if (l.section !== section) {
      if (section !== undefined) out.push("");
      out.push(l.section);
      section = l.section;
    }
    out.push(`  ${marks[l.outcome]}  ${l.name.padEnd(width)}  ${l.message}`);
  }
  out.push("", summaryLine(lines));
  return `${out.join("\n")}\n`;
}

export function jsonReport(lines: readonly CheckLine[]): string {
  const c = counts(lines);
  return `${JSON.stringify({ ok: c.fail === 0, summary: c, checks: lines }, null, 2)}\n`;
}
