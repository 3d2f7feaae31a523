/**
 * Plain-text tables for the human output of the client commands (`status`): left-aligned
 * columns two spaces apart, a header row in capitals, cells kept to one printable line (a
 * report's message may hold newlines or terminal escapes: they become spaces).
 */

const CONTROL = /[\u0000-\u001f\u007f-\u009f]+/g;

/** One line of at most `max` characters, control characters replaced. */
export function cell(value: unknown, max = 60): string {
  if (value === undefined || value === null) return "";
  const text = String(value).replace(CONTROL, " ").trim();
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

/** An ISO-8601 time without its milliseconds ("2026-12-02T04:40:19Z"); other text unchanged. */
export function shortTime(value: unknown): string {
  if (typeof value !== "string") return cell(value);
  return value.replace(/^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.\d+Z$/, "$1Z");
}

export function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd();
  return `${[line(header), ...rows.map(line)].join("\n")}\n`;
}
