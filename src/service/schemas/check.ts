/** Schema of POST /v1/check (docs/api.md "Deployment check"). */
import { errorResponses } from "./common.ts";

const nullableUrl = { type: "string", nullable: true } as const;

export const checkResponse = {
  type: "object",
  description: "each check with its outcome; the answer is 200 whatever the outcomes",
  properties: {
    publicUrl: { ...nullableUrl, description: "`publicUrl` as configured (null: not set)" },
    fetcherArtifactUrls: {
      type: "object",
      description: "`fetcherArtifact.url` and `fetcherArtifactWindows.url` (null: the service's own)",
      properties: { linux: nullableUrl, windows: nullableUrl },
      required: ["linux", "windows"],
    },
    checks: {
      type: "array",
      items: {
        type: "object",
        properties: {
          name: {
            type: "string",
            description: "`store`, or `rule <n> <kind>` (the key id starts the message)",
          },
          ok: { type: "boolean" },
          message: { type: "string", description: "what was done, or why it failed (no secret)" },
        },
        required: ["name", "ok", "message"],
      },
    },
  },
  required: ["publicUrl", "fetcherArtifactUrls", "checks"],
} as const;

export const checkSchema = {
  summary: "Check the store and the creation rules' keys",
  description:
    "Writes, reads back and deletes a probe object in the store (a key no machine uses), and wraps a " +
    "throwaway data key with every key of every creation rule, as a publish would. Needs the admin " +
    "scope. `bootseal check` calls it.",
  operationId: "checkDeployment",
  tags: ["operations"],
  response: { 200: checkResponse, ...errorResponses(401, 403, 429) },
} as const;
