/**
 * Status-change events of this replica, for GET /v1/events (server-sent events). Ids increase
 * monotonically; they start at the process start time in milliseconds, so a restarted replica
 * does not reuse the ids an earlier run handed out. The last `capacity` events are kept in a
 * ring buffer for `Last-Event-ID` resume. Replicas do not share events: a client that
 * reconnects to another replica resumes from that replica's own buffer (docs/api.md).
 */
export interface StatusEvent {
  readonly id: number;
  readonly namespace: string;
  readonly name: string;
  readonly phase: string;
  readonly version: number;
  readonly at: string;
}

export type EventListener = (event: StatusEvent) => void;

export interface EventsBus {
  publish(event: Omit<StatusEvent, "id">): StatusEvent;
  /** Events with an id above `afterId`, oldest first. */
  since(afterId: number): StatusEvent[];
  subscribe(listener: EventListener): () => void;
  readonly subscribers: number;
}

export function eventsBus(capacity: number, firstId: number = Date.now()): EventsBus {
  const ring: StatusEvent[] = [];
  const listeners = new Set<EventListener>();
  let next = firstId;
  return {
    publish(event) {
      const full: StatusEvent = { id: next++, ...event };
      ring.push(full);
      if (ring.length > capacity) ring.shift();
      for (const listener of listeners) listener(full);
      return full;
    },
    since(afterId) {
      return ring.filter((e) => e.id > afterId);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    get subscribers() {
      return listeners.size;
    },
  };
}
