/** Schemas of the status routes, the machine list and the events stream. */
import { REASON_MAX_BYTES } from "../../machine/boot-summary.ts";
import {
  PHASES,
  REPORT_MESSAGE_MAX_BYTES,
  REPORT_OUTPUT_MAX_BYTES,
  REPORTED_PHASES,
} from "../../machine/status-protocol.ts";
import { AUTH_ERRORS, errorResponses, machineParams, namespaceSchema } from "./common.ts";

export const statusBody = {
  type: "object",
  properties: {
    phase: { type: "string", enum: REPORTED_PHASES },
    message: { type: "string", maxLength: REPORT_MESSAGE_MAX_BYTES },
    attempt: { type: "integer", minimum: 0, maximum: 1_000_000 },
    exitCode: { type: "integer", minimum: -2_147_483_648, maximum: 2_147_483_647 },
    output: { type: "string", maxLength: REPORT_OUTPUT_MAX_BYTES },
  },
  required: ["phase"],
  additionalProperties: false,
} as const;

const historyEntry = {
  type: "object",
  properties: {
    phase: { type: "string", enum: PHASES },
    at: { type: "string", format: "date-time" },
    by: { type: "string" },
    message: { type: "string" },
    attempt: { type: "integer" },
    exitCode: { type: "integer" },
    output: { type: "string" },
    version: { type: "integer" },
    truncated: { type: "boolean", description: "the output (its start) or message was cut when stored" },
  },
  required: ["phase", "at", "by", "version"],
} as const;

const summary = {
  namespace: { type: "string" },
  name: { type: "string" },
  phase: { type: "string", enum: PHASES },
  version: { type: "integer" },
  updatedAt: { type: "string", format: "date-time" },
  published: { type: "boolean", description: "a config is stored for the machine" },
} as const;

/** The Cluster API objects a config was published for (status-record.ts CapiRef). */
const capiRef = {
  type: "object",
  description: "the Cluster API objects the config was published for, when the publisher named them",
  properties: {
    cluster: { type: "string" },
    machine: { type: "string" },
    bootsealConfig: { type: "string" },
  },
  additionalProperties: false,
} as const;

/** When a phase was reached, per phase (src/machine/boot-summary.ts). */
const phaseTimes = {
  type: "object",
  properties: Object.fromEntries(PHASES.map((p) => [p, { type: "string", format: "date-time" }])),
  additionalProperties: false,
} as const;

/** A machine in the list: the summary and its current boot (src/machine/boot-summary.ts). */
const listItem = {
  type: "object",
  properties: {
    ...summary,
    capi: capiRef,
    since: { type: "string", format: "date-time", description: "when the current phase began" },
    reached: {
      ...phaseTimes,
      description: "when this boot (the latest publish) first reached each phase, as far as the history goes",
    },
    failure: {
      type: "object",
      description: "phase `failed` only: the latest failed report of this boot",
      properties: {
        reason: {
          type: "string",
          description: `the first line of its message, at most ${REASON_MAX_BYTES} UTF-8 bytes ("" when none)`,
        },
        exitCode: { type: "integer" },
      },
      required: ["reason"],
    },
  },
  required: ["namespace", "name", "phase", "version", "since", "reached"],
} as const;

export const statusRecordResponse = {
  type: "object",
  properties: {
    ...summary,
    config: {
      type: ["object", "null"],
      properties: {
        etag: { type: "string" },
        sha256: { type: "string" },
        publishedAt: { type: "string", format: "date-time" },
        format: { type: "string", enum: ["binary", "json", "yaml"] },
        capi: capiRef,
      },
    },
    history: { type: "array", items: historyEntry },
  },
  required: ["namespace", "name", "phase", "version", "updatedAt", "history"],
} as const;

function reportAnswer(description: string) {
  return {
    description,
    type: "object",
    properties: { phase: summary.phase, version: summary.version, updatedAt: summary.updatedAt },
    required: ["phase", "version", "updatedAt"],
  } as const;
}

export const postStatusSchema = {
  summary: "Report a bootstrap phase (the machine, with its bootstrap token)",
  operationId: "postStatus",
  tags: ["status"],
  params: machineParams,
  body: statusBody,
  response: {
    200: reportAnswer("Written: the report is in the store."),
    202: reportAnswer(
      "Held (intermediate phases): written with the machine's next terminal report or within `status.coalesce` (docs/api.md, Status durability).",
    ),
    ...errorResponses(...AUTH_ERRORS, 404, 413, 415),
  },
} as const;

export const getStatusSchema = {
  summary: "Current phase and history (last 100 entries, at most 64 KiB; the latest publish is kept)",
  description:
    "With an ETag, the status record's version: If-None-Match gives 304 while it is current " +
    "(the service still reads the store; nothing is sent or parsed).",
  operationId: "getStatus",
  tags: ["status"],
  params: machineParams,
  headers: {
    type: "object",
    properties: {
      "if-none-match": { type: "string", description: "an ETag: 304 when the status is unchanged" },
    },
  },
  response: {
    200: {
      ...statusRecordResponse,
      description: "the status record",
      headers: { etag: { type: "string", description: "its version, for If-None-Match" } },
    },
    304: { description: "not modified", type: "null" },
    ...errorResponses(...AUTH_ERRORS, 404),
  },
} as const;

export const listSchema = {
  summary: "Machines with their current phase",
  description: "Paginated in store order: pass the returned `next` as `after` for the next page.",
  operationId: "listMachines",
  tags: ["status"],
  querystring: {
    type: "object",
    properties: {
      namespace: namespaceSchema,
      phase: { type: "string", enum: PHASES },
      limit: { type: "integer", minimum: 1, maximum: 1000, default: 100 },
      after: { type: "string", maxLength: 127, pattern: "^[a-z0-9-]+/[a-z0-9-]+$" },
    },
    additionalProperties: false,
  },
  response: {
    200: {
      type: "object",
      properties: {
        items: {
          type: "array",
          items: listItem,
        },
        next: { type: "string", description: "cursor for the next page; absent on the last page" },
      },
      required: ["items"],
    },
    ...errorResponses(...AUTH_ERRORS),
  },
} as const;

export const eventsSchema = {
  summary: "Server-sent events of status changes made through this replica",
  description:
    "text/event-stream; each event: id (monotonic per replica), event: status, data: JSON " +
    "{namespace, name, phase, version, at}. Last-Event-ID resumes from this replica's ring buffer. " +
    "Comment lines are heartbeats.",
  operationId: "streamEvents",
  tags: ["status"],
  querystring: {
    type: "object",
    properties: { namespace: namespaceSchema },
    additionalProperties: false,
  },
  headers: {
    type: "object",
    properties: { "last-event-id": { type: "string", description: "resume after this event id" } },
  },
  response: {
    200: {
      description: "the event stream (never ends while the service runs)",
      content: { "text/event-stream": { schema: { type: "string" } } },
    },
    ...errorResponses(...AUTH_ERRORS),
  },
} as const;
