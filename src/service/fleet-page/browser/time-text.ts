/** Durations and times as an operator reads them: "4m 12s", "3m ago". Pure (no DOM). */

/** A duration: the two largest units ("1h 4m", "4m 12s", "12s"); "" when not a number. */
export function durationText(ms: number): string {
  if (!Number.isFinite(ms)) return "";
  const s = Math.max(0, Math.round(ms / 1000));
  const [d, h, m] = [Math.floor(s / 86_400), Math.floor(s / 3600) % 24, Math.floor(s / 60) % 60];
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${m}m`;
  if (m > 0) return `${m}m ${s % 60}s`;
  return `${s}s`;
}

/** A time relative to now: "12s ago" ("in 3s" for a clock ahead of this one). */
export function agoText(at: number, now: number): string {
  if (!Number.isFinite(at)) return "";
  return at > now + 1000 ? `in ${durationText(at - now)}` : `${durationText(now - at)} ago`;
}
