/**
 * SHA-256 and HMAC-SHA-256 from node:crypto, in the shape the SDK's SigV4 signer
 * (@smithy/signature-v4) takes: the S3 store's object calls and the fetcher's aws-iam login
 * sign with it.
 */
import { createHash, createHmac, type Hash, type Hmac } from "node:crypto";
import type { Checksum, SourceData } from "@smithy/types";

function toBytes(data: SourceData): Uint8Array {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
}

export class NodeSha256 implements Checksum {
  readonly #secret: Uint8Array | undefined;
  #hash: Hash | Hmac;

  constructor(secret?: SourceData) {
    this.#secret = secret === undefined ? undefined : toBytes(secret);
    this.#hash = this.#fresh();
  }

  #fresh(): Hash | Hmac {
    return this.#secret === undefined ? createHash("sha256") : createHmac("sha256", this.#secret);
  }

  update(data: Uint8Array): void {
    this.#hash.update(toBytes(data));
  }

  async digest(): Promise<Uint8Array> {
    return new Uint8Array(this.#hash.digest());
  }

  reset(): void {
    this.#hash = this.#fresh();
  }
}
