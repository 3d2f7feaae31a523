/**
 * CRC32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum Cloud KMS puts in its
 * `*_crc32c` fields. A checksum, not a cipher; used by the GCP KMS fake (gcp-kms-fake.ts).
 */
const TABLE = new Uint32Array(256);
for (let n = 0; n < 256; n++) {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  TABLE[n] = c >>> 0;
}

export function crc32c(data: Uint8Array): number {
  let crc = 0xffffffff;
  for (const byte of data) crc = (TABLE[(crc ^ byte) & 0xff] as number) ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}
