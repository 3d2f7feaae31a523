/** Store URL parsing and the settings openStore derives from options and the environment. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { gcsSettings, openStore, parseStoreUrl, s3Settings } from "../../../providers/stores/index.ts";
import { formatStoreUrl, validateKey, validateListPrefix } from "../../../providers/stores/store-url.ts";
import { BootsealError } from "../../../src/errors.ts";

const GOOD: [string, object][] = [
  ["file:///var/lib/bootseal/store", { scheme: "file", dir: "/var/lib/bootseal/store" }],
  ["file://./data/store", { scheme: "file", dir: "/srv/app/data/store" }],
  ["file://data/store/", { scheme: "file", dir: "/srv/app/data/store" }],
  ["FILE:///x", { scheme: "file", dir: "/x" }],
  ["s3://bucket", { scheme: "s3", bucket: "bucket", prefix: "" }],
  ["s3://bucket/", { scheme: "s3", bucket: "bucket", prefix: "" }],
  ["s3://my.bucket-1/prod/bootseal", { scheme: "s3", bucket: "my.bucket-1", prefix: "prod/bootseal/" }],
  ["s3://bucket/prod/bootseal/", { scheme: "s3", bucket: "bucket", prefix: "prod/bootseal/" }],
  ["gs://my_bucket/p", { scheme: "gs", bucket: "my_bucket", prefix: "p/" }],
  ["gs://b12", { scheme: "gs", bucket: "b12", prefix: "" }],
];

for (const [url, expected] of GOOD) {
  test(`parses ${url}`, () => {
    assert.deepEqual(parseStoreUrl(url, "/srv/app"), expected);
  });
}

const BAD: [string, RegExp][] = [
  ["", /malformed store URL/],
  ["/var/lib/store", /malformed store URL/],
  ["file:relative", /malformed store URL/],
  ["file://", /needs a directory/],
  ["file:///", /file system root/],
  ["file://../elsewhere", /'\.\.'/],
  ["file:///a/../../etc", /'\.\.'/],
  ["ftp://host/x", /unknown store scheme "ftp"/],
  ["gcs://bucket", /unknown store scheme "gcs" \(use gs:\/\/\)/],
  ["s3://", /needs a bucket/],
  ["s3:///prefix", /needs a bucket/],
  ["gs:///x", /needs a bucket/],
  ["s3://AKIAXXX:secretvalue@bucket/p", /credentials do not belong/],
  ["gs://user@bucket", /credentials do not belong/],
  ["s3://localhost:9000/bucket", /names a bucket, not a host or port/],
  ["s3://Bucket", /invalid s3 bucket name/],
  ["s3://ab", /invalid s3 bucket name/],
  ["s3://under_score", /invalid s3 bucket name/],
  ["s3://-bucket", /invalid s3 bucket name/],
  ["s3://a..b", /invalid s3 bucket name/],
  ["s3://bucket/a//b", /empty path segment/],
  ["s3://bucket/a/../b", /'\.' and '\.\.'/],
  ["gs://bucket/./b", /'\.' and '\.\.'/],
  ["s3://bucket/p?region=x", /no query string/],
  ["s3://bucket/p#frag", /no query string/],
  ["s3://bucket/with space", /spaces or control/],
  ["s3://bucket/tab\there", /spaces or control/],
];

for (const [url, message] of BAD) {
  test(`refuses ${JSON.stringify(url)} with USAGE`, () => {
    assert.throws(
      () => parseStoreUrl(url, "/srv/app"),
      (err) => err instanceof BootsealError && err.code === "USAGE" && message.test(err.message),
    );
  });
}

test("error messages never repeat a credential from the URL", () => {
  for (const url of ["s3://AKIAXXX:secretvalue@bucket/p", "gs://AKIAXXX:secretvalue@b"]) {
    assert.throws(
      () => openStore(url),
      (err) =>
        err instanceof BootsealError && !err.message.includes("secretvalue") && !err.message.includes("AKIA"),
    );
  }
});

test("formatStoreUrl gives the canonical URL stores report", () => {
  assert.equal(formatStoreUrl(parseStoreUrl("s3://b1b/p/q/")), "s3://b1b/p/q");
  assert.equal(formatStoreUrl(parseStoreUrl("gs://b1b")), "gs://b1b");
  assert.equal(formatStoreUrl(parseStoreUrl("file://./x", "/srv")), "file:///srv/x");
  assert.equal(openStore("s3://b1b/p/", { env: {} }).url, "s3://b1b/p");
  assert.equal(openStore("gs://b1b/p/", { env: {} }).url, "gs://b1b/p");
});

test("keys: valid ones pass, malformed ones are BAD_INPUT", () => {
  for (const key of ["configs/ns/name", "tokens/ns/name.json", "a", "ä/ö ü", "x".repeat(1024), ".hidden/x"]) {
    assert.equal(validateKey(key), key);
  }
  for (const key of [
    "",
    "/a",
    "a/",
    "a//b",
    ".",
    "..",
    "a/..",
    "a/./b",
    "a\u0007",
    "a\u009f",
    "\ud800",
    "a\\b",
  ]) {
    assert.throws(
      () => validateKey(key),
      (err) => err instanceof BootsealError && err.code === "BAD_INPUT",
      key,
    );
  }
  assert.throws(() => validateKey("é".repeat(513)), /longer than 1024 bytes/); // 1026 bytes in UTF-8
  assert.throws(() => validateKey("ns/.bootseal-tmp.1"), /reserved/);
  assert.equal(validateListPrefix(""), "");
  assert.equal(validateListPrefix("configs/"), "configs/");
  assert.equal(validateListPrefix("configs/ns/na"), "configs/ns/na");
  assert.throws(() => validateListPrefix("configs//"), /empty path segment/);
});

test("the store prefix counts against the 1024-byte object-name limit", async () => {
  const store = openStore(`s3://bucket/${"p".repeat(100)}`, { env: {}, s3: { region: "us-east-1" } });
  await assert.rejects(
    store.get("k".repeat(1000)),
    (err) =>
      err instanceof BootsealError && err.code === "BAD_INPUT" && /with the store prefix/.test(err.message),
  );
});

test("S3 settings: options first, then the AWS variables, then defaults", () => {
  assert.deepEqual(s3Settings({}, {}), { region: "us-east-1", forcePathStyle: false });
  assert.deepEqual(
    s3Settings(
      {},
      {
        AWS_ENDPOINT_URL: "http://generic:1",
        AWS_ENDPOINT_URL_S3: "http://s3only:2",
        AWS_REGION: "eu-west-1",
      },
    ),
    { endpoint: "http://s3only:2", region: "eu-west-1", forcePathStyle: true },
  );
  assert.equal(s3Settings({}, { AWS_ENDPOINT_URL: "http://generic:1" }).endpoint, "http://generic:1");
  assert.equal(s3Settings({}, { AWS_DEFAULT_REGION: "ap-south-1" }).region, "ap-south-1");
  assert.equal(
    s3Settings({}, { AWS_ENDPOINT_URL_S3: "http://m:9", BOOTSEAL_S3_FORCE_PATH_STYLE: "false" })
      .forcePathStyle,
    false,
  );
  assert.equal(s3Settings({}, { BOOTSEAL_S3_FORCE_PATH_STYLE: "1" }).forcePathStyle, true);
  const explicit = s3Settings(
    { endpoint: "http://opt:3", region: "us-west-2", forcePathStyle: false },
    { AWS_ENDPOINT_URL_S3: "http://env:4", AWS_REGION: "eu-west-1", BOOTSEAL_S3_FORCE_PATH_STYLE: "true" },
  );
  assert.deepEqual(explicit, { endpoint: "http://opt:3", region: "us-west-2", forcePathStyle: false });
  assert.throws(
    () => s3Settings({}, { BOOTSEAL_S3_FORCE_PATH_STYLE: "maybe" }),
    /BOOTSEAL_S3_FORCE_PATH_STYLE/,
  );
  assert.throws(() => s3Settings({}, { AWS_ENDPOINT_URL_S3: "ftp://x" }), /http/);
  assert.throws(
    () => s3Settings({}, { AWS_ENDPOINT_URL_S3: "http://user:hunter2@m:9" }),
    (err) => err instanceof BootsealError && err.code === "USAGE" && !err.message.includes("hunter2"),
  );
});

test("GCS settings: options first, then STORAGE_EMULATOR_HOST (with or without a scheme)", () => {
  assert.deepEqual(gcsSettings({}, {}), {});
  assert.deepEqual(gcsSettings({}, { STORAGE_EMULATOR_HOST: "127.0.0.1:4443", GOOGLE_CLOUD_PROJECT: "p1" }), {
    apiEndpoint: "http://127.0.0.1:4443",
    projectId: "p1",
  });
  assert.equal(
    gcsSettings({}, { STORAGE_EMULATOR_HOST: "https://gcs.local" }).apiEndpoint,
    "https://gcs.local",
  );
  assert.equal(
    gcsSettings({ apiEndpoint: "http://opt:1" }, { STORAGE_EMULATOR_HOST: "http://env:2" }).apiEndpoint,
    "http://opt:1",
  );
});
