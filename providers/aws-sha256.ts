/**
 * SHA-256 and HMAC-SHA-256 from node:crypto, in the shape the SDK's SigV4 signer
 * (@smithy/signature-v4) takes: the S3 store's object calls and the fetcher's aws-iam login
 * sign with it. A byte key is made a KeyObject first: node:crypto's createHmac with raw bytes
 * looks for a KeyObject and a CryptoKey by catching exceptions, 10 µs per HMAC on Node 24
 * against 3 µs this way, and the signer makes two HMACs per request (those checks were 7.8 %
 * of the service's CPU samples in an S3 boot storm, docs/benchmarks.md "Session 11").
 */
import { createHash, createHmac, createSecretKey, type Hash, type Hmac, type KeyObject } from "node:crypto";
import type { Checksum, SourceData } from "@smithy/types";

function toKey(secret: SourceData): string | KeyObject {
  return typeof secret === "string" ? secret : createSecretKey(toBytes(secret));
}

function toBytes(data: SourceData): Uint8Array {
  if (typeof data === "string") return Buffer.from(data, "utf8");
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  return new Uint8Array(data);
}

export class NodeSha256 implements Checksum {
  readonly #secret: string | KeyObject | undefined;
  #hash: Hash | Hmac;

  constructor(secret?: SourceData) {
    this.#secret = secret === undefined ? undefined : toKey(secret);
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
