/**
 * A progress line for long CLI work (`rotate --store`) on a terminal's standard error:
 * `[#########...........]  120/1000  12%  35.2/s  ETA 0:25`, redrawn in place with `\r` at
 * most every `intervalMs` (default 250 ms: four times a second), and always for the last item.
 * `note()` prints a line above the bar (a failure) without tearing it. The clock is injected
 * so tests drive it without waiting.
 */

export interface ProgressOptions {
  readonly total: number;
  readonly stream: NodeJS.WritableStream;
  readonly now?: () => number;
  readonly intervalMs?: number;
  readonly width?: number;
}

function clock(seconds: number): string {
  if (!Number.isFinite(seconds)) return "?";
  const s = Math.max(0, Math.round(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const sec = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${sec}` : `${m}:${sec}`;
}

/** The bar's text for `done` of `total` after `elapsedMs`. */
export function progressLine(done: number, total: number, elapsedMs: number, width = 24): string {
  const fraction = total === 0 ? 1 : Math.min(1, done / total);
  const filled = Math.round(fraction * width);
  const rate = elapsedMs > 0 ? (done * 1000) / elapsedMs : 0;
  const eta = done >= total ? "done" : rate > 0 ? `ETA ${clock((total - done) / rate)}` : "ETA ?";
  const count = `${String(done).padStart(String(total).length)}/${total}`;
  return `[${"#".repeat(filled)}${".".repeat(width - filled)}]  ${count}  ${Math.floor(fraction * 100)}%  ${rate.toFixed(1)}/s  ${eta}`;
}

export class Progress {
  private done = 0;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private drawn = false;
  private readonly started: number;
  private readonly now: () => number;
  private readonly options: ProgressOptions;

  constructor(options: ProgressOptions) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.started = this.now();
    this.draw();
  }

  /** One more item finished. */
  tick(): void {
    this.done++;
    const t = this.now();
    if (this.done >= this.options.total || t - this.lastDraw >= (this.options.intervalMs ?? 250)) this.draw();
  }

  /** A line above the bar. */
  note(line: string): void {
    this.clear();
    this.options.stream.write(`${line}\n`);
    this.draw();
  }

  /** Leaves the final bar on its own line. */
  finish(): void {
    this.draw();
    this.options.stream.write("\n");
    this.drawn = false;
  }

  private clear(): void {
    if (this.drawn) this.options.stream.write("\r\x1b[K");
    this.drawn = false;
  }

  private draw(): void {
    const t = this.now();
    this.lastDraw = t;
    this.options.stream.write(
      `\r\x1b[K${progressLine(this.done, this.options.total, t - this.started, this.options.width)}`,
    );
    this.drawn = true;
  }
}
