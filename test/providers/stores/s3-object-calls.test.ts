/**
 * The S3 store's object calls (s3-object-calls.ts) against `S3Client.send`, the SDK's own way
 * of making the same call: both hand their request to the client's HTTP handler, here one
 * that records it, so the two can be compared for AWS in several partitions, FIPS, dual-stack,
 * custom endpoints (with a base path, path-style or not) and keys that need escaping. Then
 * error answers from a FAKE S3 server (node:http, S3's XML error body): the code is read,
 * an oversized or non-XML body is not read past its cap.
 */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { Readable } from "node:stream";
import { test } from "node:test";
import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from "@aws-sdk/client-s3";
import type { HttpRequest } from "@smithy/types";
import { openStore } from "../../../providers/stores/index.ts";
import { keyPath, S3ObjectCalls, S3ResponseError } from "../../../providers/stores/s3-object-calls.ts";
import { BootsealError } from "../../../src/errors.ts";

const credentials = {
  accessKeyId: "AKIDEXAMPLE",
  secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
};

/** A client whose HTTP handler records each request and answers 200 with an etag. */
function recordingClient(config: S3ClientConfig) {
  const seen: HttpRequest[] = [];
  const requestHandler = {
    async handle(request: HttpRequest) {
      seen.push(request);
      return {
        response: {
          statusCode: 200,
          headers: { etag: '"e"', "content-length": "0" },
          body: Readable.from([]),
        },
      };
    },
  };
  const client = new S3Client({
    credentials,
    maxAttempts: 1,
    // As the store makes its client (s3.ts): no checksums where the API does not require one.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
    ...config,
    requestHandler,
  });
  return { client, seen };
}

/** What has to match: where the request goes, and what it signs (the SDK's own headers aside). */
function shape(r: HttpRequest) {
  const sdkOnly = /^(user-agent|x-amz-user-agent|amz-sdk-invocation-id|amz-sdk-request|x-amz-date)$/;
  const signed = /SignedHeaders=([^,]+)/.exec(String(r.headers.authorization))?.[1] ?? "";
  return {
    method: r.method,
    protocol: r.protocol,
    hostname: r.hostname,
    port: r.port,
    path: r.path,
    query: r.query,
    headers: Object.fromEntries(
      Object.entries(r.headers)
        .filter(([name]) => !sdkOnly.test(name.toLowerCase()) && name.toLowerCase() !== "authorization")
        .map(([name, value]) => [name.toLowerCase(), value]),
    ),
    signed: signed.split(";").filter((h) => !sdkOnly.test(h)),
    credential: /Credential=AKIDEXAMPLE\/\d{8}\/([^,]+)/.exec(String(r.headers.authorization))?.[1],
  };
}

const CONFIGS: Record<string, S3ClientConfig> = {
  "AWS eu-west-1": { region: "eu-west-1" },
  "AWS cn-north-1 (aws-cn partition)": { region: "cn-north-1" },
  "AWS us-gov-west-1 with FIPS": { region: "us-gov-west-1", useFipsEndpoint: true },
  "AWS us-east-1 dual-stack": { region: "us-east-1", useDualstackEndpoint: true },
  "AWS path-style": { region: "ap-southeast-2", forcePathStyle: true },
  "MinIO, path-style": { region: "us-east-1", endpoint: "http://127.0.0.1:9000", forcePathStyle: true },
  "an endpoint with a base path, virtual-hosted": {
    region: "eu-central-1",
    endpoint: "https://s3.example.com:8443/base/",
  },
  "an endpoint with a base path, path-style": {
    region: "eu-central-1",
    endpoint: "https://s3.example.com/base",
    forcePathStyle: true,
  },
};

const KEYS = ["configs/ns/m.json", "a b/c+d/e%f", "x?y#z&w=1", "(!'*)~", "ünï/çødé/日本", "a;b,c:d@e$"];

for (const [name, config] of Object.entries(CONFIGS)) {
  test(`object calls address and sign as S3Client.send does: ${name}`, async () => {
    const { client, seen } = recordingClient(config);
    // A dotted name is path-style over TLS on AWS (no wildcard certificate matches it).
    for (const Bucket of ["my-bucket", "my-bucket.v2"]) {
      const calls = new S3ObjectCalls(client, Bucket);
      const body = new TextEncoder().encode("{}");
      for (const Key of KEYS) {
        for (const [method, command, options] of [
          ["GET", new GetObjectCommand({ Bucket, Key }), {}],
          ["HEAD", new HeadObjectCommand({ Bucket, Key }), {}],
          [
            "PUT",
            new PutObjectCommand({
              Bucket,
              Key,
              Body: body,
              ContentLength: body.byteLength,
              IfMatch: '"abc"',
              ContentType: "application/json",
            }),
            { body, headers: { "if-match": '"abc"', "content-type": "application/json" } },
          ],
          ["DELETE", new DeleteObjectCommand({ Bucket, Key }), {}],
        ] as const) {
          seen.length = 0;
          await client.send(command as GetObjectCommand);
          await calls.send(method, Key, options);
          const [viaSdk, ours] = seen;
          assert.ok(viaSdk && ours, "both reached the handler");
          assert.deepEqual(shape(ours), shape(viaSdk), `${method} ${Key}`);
        }
      }
    }
    client.destroy();
  });
}

test("keyPath: each segment percent-encoded as RFC 3986 unreserved, '/' kept", () => {
  assert.equal(keyPath("a b/c+d/(x)!*'~"), "a%20b/c%2Bd/%28x%29%21%2A%27~");
  assert.equal(keyPath("ünï"), "%C3%BCn%C3%AF");
});

/** A FAKE S3 endpoint: every request gets `status`, with `body` (or a body that never ends). */
async function fakeS3(
  status: number,
  body: string | "endless",
  storeCredentials: typeof credentials | null = credentials,
) {
  let bytesSent = 0;
  let requests = 0;
  const server = createServer((req, res) => {
    requests++;
    req.resume();
    res.writeHead(status, { "content-type": "application/xml" });
    if (body !== "endless") return res.end(body);
    const chunk = Buffer.alloc(64 * 1024, "x");
    const pump = () => {
      while (res.write(chunk)) {
        bytesSent += chunk.length;
        if (bytesSent > 64 * 1024 * 1024) return res.end();
      }
      res.once("drain", pump);
    };
    pump();
    res.on("close", () => res.removeAllListeners("drain"));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  const store = openStore("s3://bucket/p", {
    s3: {
      endpoint: `http://127.0.0.1:${port}`,
      ...(storeCredentials ? { credentials: storeCredentials } : {}),
      maxAttempts: 1,
    },
    env: {},
  });
  return {
    store,
    sent: () => bytesSent,
    requests: () => requests,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(resolve));
    },
  };
}

async function failure(p: Promise<unknown>): Promise<BootsealError> {
  const err = await p.then(
    () => assert.fail("expected a failure"),
    (e: unknown) => e,
  );
  assert.ok(err instanceof BootsealError, `expected a BootsealError, got ${String(err)}`);
  return err;
}

test("FAKE S3: the error body's <Code> names the answer", async () => {
  const fake = await fakeS3(
    403,
    '<?xml version="1.0" encoding="UTF-8"?><Error><Code>SignatureDoesNotMatch</Code><Message>no</Message></Error>',
  );
  try {
    const err = await failure(fake.store.get("k"));
    assert.equal(err.code, "STORE_FORBIDDEN");
    assert.match(err.message, /SignatureDoesNotMatch/);
    assert.ok(err.cause instanceof S3ResponseError);
    assert.equal(err.cause.status, 403);
  } finally {
    await fake.close();
  }
});

test("FAKE S3: a 503 with an endless non-XML body is STORE_UNAVAILABLE, read no further than its cap", async () => {
  const fake = await fakeS3(503, "endless");
  try {
    const err = await failure(fake.store.put("k", new Uint8Array([1]), { ifNoneMatch: "*" }));
    assert.equal(err.code, "STORE_UNAVAILABLE");
    assert.ok(err.cause instanceof S3ResponseError);
    assert.equal(err.cause.name, "ServiceUnavailable", "no <Code>: named by the status");
    assert.ok(fake.sent() < 32 * 1024 * 1024, `the server got to write ${fake.sent()} bytes`);
  } finally {
    await fake.close();
  }
});

test("FAKE S3: a 2xx body over the caller's cap is TOO_LARGE", async () => {
  const fake = await fakeS3(200, "endless");
  try {
    const err = await failure(fake.store.get("k", { maxBytes: 1024 * 1024 }));
    assert.equal(err.code, "TOO_LARGE");
    assert.ok(fake.sent() < 32 * 1024 * 1024, `the server got to write ${fake.sent()} bytes`);
  } finally {
    await fake.close();
  }
});

test("FAKE S3: no credentials anywhere is STORE_FORBIDDEN, and nothing is sent", async () => {
  // The SDK's default chain: no AWS_* variables, no shared files, no instance metadata.
  const saved = { ...process.env };
  for (const name of Object.keys(process.env)) if (name.startsWith("AWS_")) delete process.env[name];
  Object.assign(process.env, {
    AWS_EC2_METADATA_DISABLED: "true",
    AWS_SHARED_CREDENTIALS_FILE: "/nonexistent/credentials",
    AWS_CONFIG_FILE: "/nonexistent/config",
  });
  const fake = await fakeS3(200, "", null);
  try {
    const err = await failure(fake.store.get("k"));
    assert.equal(err.code, "STORE_FORBIDDEN", err.message);
    assert.equal(fake.requests(), 0);
  } finally {
    await fake.close();
    for (const name of Object.keys(process.env)) if (!(name in saved)) delete process.env[name];
    Object.assign(process.env, saved);
  }
});
