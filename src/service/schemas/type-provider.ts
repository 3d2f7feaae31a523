/**
 * Request types (params, querystring, body) derived from the route schemas by
 * @fastify/type-provider-json-schema-to-ts, so handlers read validated input without casts.
 * Replies are left untyped: the response schemas serve serialisation and the OpenAPI
 * document, list their objects open-endedly, and the config route sends raw bytes.
 */
import type { JsonSchemaToTsProvider } from "@fastify/type-provider-json-schema-to-ts";
import type { FastifyTypeProvider } from "fastify";

/** What the package's provider derives for one schema (Fastify resolves providers the same way). */
type RequestType<Schema> = (JsonSchemaToTsProvider & { schema: Schema })["validator"];

export interface RequestTypeProvider extends FastifyTypeProvider {
  validator: RequestType<this["schema"]>;
  serializer: unknown;
}
