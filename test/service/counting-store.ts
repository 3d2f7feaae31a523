/** An object store that records every call made to it (store-operation tests). */
import type { ObjectStore } from "../../providers/stores/object-store.ts";

/** Every call, as `op key` (list as `list prefix`). */
export function counting(inner: ObjectStore): { store: ObjectStore; calls: string[] } {
  const calls: string[] = [];
  const seen = <T>(call: string, result: T): T => {
    calls.push(call);
    return result;
  };
  const store: ObjectStore = {
    url: inner.url,
    get: (key, o) => seen(`get ${key}`, inner.get(key, o)),
    head: (key, o) => seen(`head ${key}`, inner.head(key, o)),
    put: (key, body, c, o) => seen(`put ${key}`, inner.put(key, body, c, o)),
    delete: (key, c, o) => seen(`delete ${key}`, inner.delete(key, c, o)),
    list: (prefix, o) => seen(`list ${prefix}`, inner.list(prefix, o)),
  };
  return { store, calls };
}
