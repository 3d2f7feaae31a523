/**
 * The one duration grammar, for configuration keys and command-line flags alike. It is the
 * union of the two grammars bootseal had (the service's `bootstrapToken.ttl` and the fetcher's
 * flags), so nothing that was accepted before is refused now:
 *
 * - Go-style units, one or several in a row: `500ms`, `90s`, `5m`, `1h30m`, `2h45m10s`;
 *   plus `d` (24 h) as in `7d`. A part may have a fraction: `1.5h`, `0.5s`.
 * - A bare number is seconds: `30`, `2.5`; so is a YAML number (`ttl: 30`).
 *
 * Spaces around the text are ignored, none inside it; no sign, no empty text. The result is
 * rounded to whole milliseconds. Lower bounds (e.g. a token lifetime of at least 1 s) are the
 * caller's to check: `min` names one.
 */
import { BootsealError } from "./errors.ts";

const UNIT_MS: Readonly<Record<string, number>> = {
  ms: 1,
  s: 1000,
  m: 60_000,
  h: 3_600_000,
  d: 86_400_000,
};

const PART = /(\d+(?:\.\d+)?)(ms|s|m|h|d)/g;
const NUMBER = /^\d+(?:\.\d+)?$/;

export interface DurationOptions {
  /** Smallest accepted value, ms; below it is a USAGE error naming `where`. */
  readonly min?: number;
}

/** Milliseconds, or undefined when `value` is not a duration in the grammar above. */
export function tryParseDuration(value: unknown): number | undefined {
  if (typeof value === "number")
    return Number.isFinite(value) && value >= 0 ? Math.round(value * 1000) : undefined;
  if (typeof value !== "string") return undefined;
  const text = value.trim();
  if (NUMBER.test(text)) return Math.round(Number(text) * 1000);
  const parts = [...text.matchAll(PART)];
  if (text === "" || parts.map((p) => p[0]).join("") !== text) return undefined;
  return Math.round(parts.reduce((sum, p) => sum + Number(p[1]) * (UNIT_MS[p[2] as string] ?? 0), 0));
}

/**
 * Parses a duration; `where` names what is being set in the error (`bootstrapToken.ttl`,
 * `--deadline`), which is a USAGE error: a bad duration is always the operator's input.
 */
export function parseDuration(value: unknown, where: string, options: DurationOptions = {}): number {
  const ms = tryParseDuration(value);
  if (ms === undefined) {
    throw new BootsealError(
      "USAGE",
      `${where}: must be a duration such as 30s, 5m, 1h30m or 500ms, got ${JSON.stringify(value)}`,
    );
  }
  if (options.min !== undefined && ms < options.min) {
    throw new BootsealError("USAGE", `${where}: must be at least ${formatDuration(options.min)}`);
  }
  return ms;
}

/** The shortest text parseDuration reads back to `ms` (whole units, largest first). */
export function formatDuration(ms: number): string {
  if (ms === 0) return "0s";
  let rest = Math.round(ms);
  let out = "";
  for (const unit of ["d", "h", "m", "s", "ms"]) {
    const size = UNIT_MS[unit] as number;
    const n = Math.floor(rest / size);
    if (n > 0) {
      out += `${n}${unit}`;
      rest -= n * size;
    }
  }
  return out;
}

/** parseDuration for a command-line flag given by its name without dashes ("deadline"). */
export function parseFlagDuration(text: string, flag: string): number {
  return parseDuration(text, `--${flag}`);
}
