/**
 * The boot storm's ceiling: a node:http server that answers bootseal's machine routes with one
 * fixed small body, so the client's own cost is measured. Run as its own process (its memory
 * and CPU apart from the client's): `node bench/lib/noop-server.ts PORT`.
 */
import { createServer } from "node:http";
import { argv } from "node:process";

const port = Number(argv[2]);
if (!Number.isInteger(port) || port <= 0) throw new Error("usage: noop-server.ts PORT");

// Shaped like a publish answer, so the client's publish step finds a token in it.
const BODY = Buffer.from('{"bootstrapToken":"noop","version":1}');

const server = createServer((req, res) => {
  // Read the whole request body before answering, as a real server does.
  req.resume();
  req.on("end", () => {
    res.writeHead(req.method === "PUT" ? 201 : 200, {
      "content-type": "application/json",
      "content-length": BODY.length,
    });
    res.end(BODY);
  });
});
server.keepAliveTimeout = 60_000;
server.listen(port, "127.0.0.1", () => console.log(`listening on http://127.0.0.1:${port}`));
process.once("SIGTERM", () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
