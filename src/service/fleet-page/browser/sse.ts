/**
 * A server-sent events parser (the WHATWG "event stream interpretation", without the
 * EventSource object): the page reads /v1/events with fetch() so that it can send its bearer
 * token, which EventSource cannot. Feed it decoded text in chunks of any size; it calls
 * `onEvent` once per dispatched event and remembers the last id and the retry delay.
 * No DOM and no Node: the unit tests run it under Node, the page in the browser.
 */
export interface SseEvent {
  readonly type: string;
  readonly data: string;
  /** The last event id in effect when this event was dispatched ("" when none). */
  readonly lastEventId: string;
}

export class SseParser {
  #buffer = "";
  #data: string[] = [];
  #type = "";
  #pendingCr = false;
  /** The last `id:` seen (sent back as Last-Event-ID on reconnect). */
  lastEventId = "";
  /** The last valid `retry:` in milliseconds, if any. */
  retryMs: number | undefined;
  readonly #onEvent: (e: SseEvent) => void;

  constructor(onEvent: (e: SseEvent) => void) {
    this.#onEvent = onEvent;
  }

  /** A chunk of the stream's text (already UTF-8 decoded, in stream mode). */
  push(text: string): void {
    let chunk = text;
    // A CR at the end of the last chunk was a line end; a LF right after it belongs to it.
    if (this.#pendingCr && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.#pendingCr = false;
    this.#buffer += chunk;
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.#buffer);
      if (!m) break;
      if (m[0] === "\r" && m.index === this.#buffer.length - 1) this.#pendingCr = true;
      const line = this.#buffer.slice(0, m.index);
      this.#buffer = this.#buffer.slice(m.index + m[0].length);
      this.#line(line);
    }
  }

  #line(line: string): void {
    if (line === "") {
      this.#dispatch();
      return;
    }
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.#type = value;
        break;
      case "data":
        this.#data.push(value);
        break;
      case "id":
        if (!value.includes("\u0000")) this.lastEventId = value;
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) this.retryMs = Number(value);
        break;
      default:
        break;
    }
  }

  #dispatch(): void {
    const type = this.#type || "message";
    const data = this.#data;
    this.#type = "";
    this.#data = [];
    if (data.length === 0) return;
    this.#onEvent({ type, data: data.join("\n"), lastEventId: this.lastEventId });
  }
}
