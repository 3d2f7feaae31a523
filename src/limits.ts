/**
 * The one input cap: every document, answer, object or file bootseal reads whole into memory
 * (the CLI's input, the fetcher's download, an object rotate reads, a service request body at
 * most) stops here. 64 MiB is far above any bootstrap payload and small enough that a hostile
 * or broken peer cannot exhaust memory.
 */
export const MAX_DOCUMENT_BYTES = 64 * 1024 * 1024;

/** "64 MiB" for messages, so a changed limit cannot leave a stale number in an error. */
export function describeBytes(bytes: number): string {
  const units = ["bytes", "KiB", "MiB", "GiB"] as const;
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && value % 1024 === 0 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value} ${units[unit]}`;
}
