// The peer side of bench/fanout (issue 20): a minimal server on Fedify, configured the way
// upstream Hollo configures it (src/federation/federation.ts there): PostgresKvStore and
// PostgresMessageQueue from @fedify/postgres on the same PostgreSQL, wrapped in a
// ParallelMessageQueue of 10; web nodes (`ROLE=web`) never start the queue, workers
// (`ROLE=worker`) do. It has one actor, `bench`, whose followers are the recipients listed in
// `RECIPIENTS` (a JSON file written by the driver), and one extra route, `POST /publish`,
// which sends a `Create(Note)` to all of them with `preferSharedInbox` — what upstream Hollo
// does when a status is posted. Its inbox (bench/inbox) stores each incoming note once.
//
//   node harness.mjs keygen FILE                write an RSA key pair as JWKs
//   ROLE=web|worker DATABASE_URL=… ORIGIN=… KEYS=FILE [RECIPIENTS=FILE] [PORT=…] node harness.mjs
//
// Prints `ready` once listening (web) or once the queue runs (worker).
import { readFile, writeFile } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import {
  Create,
  Note,
  ParallelMessageQueue,
  Person,
  PUBLIC_COLLECTION,
  createFederation,
  exportJwk,
  generateCryptoKeyPair,
  importJwk,
} from "@fedify/fedify";
import { PostgresKvStore, PostgresMessageQueue } from "@fedify/postgres";
import { serve } from "@hono/node-server";
import postgres from "postgres";
import { Temporal } from "@js-temporal/polyfill";

function need(name) {
  const value = process.env[name];
  if (!value) {
    console.error(`harness: ${name} must be set`);
    process.exit(2);
  }
  return value;
}

if (process.argv[2] === "keygen") {
  const pair = await generateCryptoKeyPair("RSASSA-PKCS1-v1_5");
  await writeFile(
    process.argv[3],
    JSON.stringify({
      privateKey: await exportJwk(pair.privateKey),
      publicKey: await exportJwk(pair.publicKey),
    }),
  );
  process.exit(0);
}

const role = need("ROLE");
if (role !== "web" && role !== "worker") {
  console.error(`harness: ROLE must be web or worker, not ${role}`);
  process.exit(2);
}
const origin = need("ORIGIN");
const keys = JSON.parse(await readFile(need("KEYS"), "utf8"));
const keyPair = {
  privateKey: await importJwk(keys.privateKey, "private"),
  publicKey: await importJwk(keys.publicKey, "public"),
};
const parallel = Number(process.env.PARALLEL ?? "10");

// Hollo's pool size is postgres.js's default (10); the queue's LISTEN takes one more. A libpq
// URL whose `host` parameter is a socket directory (how bench/fanout's local server listens)
// becomes postgres.js's `path` option.
function connect(raw) {
  const url = new URL(raw);
  const socketDir = url.searchParams.get("host");
  const options = { max: 10, onnotice: () => {} };
  if (!socketDir?.startsWith("/")) return postgres(raw, options);
  const port = url.searchParams.get("port") ?? "5432";
  return postgres({
    ...options,
    path: `${socketDir}/.s.PGSQL.${port}`,
    user: decodeURIComponent(url.username),
    database: decodeURIComponent(url.pathname.slice(1)),
  });
}
const sql = connect(need("DATABASE_URL"));
const federation = createFederation({
  kv: new PostgresKvStore(sql),
  queue: new ParallelMessageQueue(new PostgresMessageQueue(sql), parallel),
  manuallyStartQueue: role === "web",
  allowPrivateAddress: true,
  // The sink verifies draft-cavage signatures; knocking with RFC 9421 first would make every
  // first request to a host a refused one, which is not what this bench compares.
  firstKnock: "draft-cavage-http-signatures-12",
  origin,
});

federation
  .setActorDispatcher("/users/{identifier}", async (ctx, identifier) => {
    if (identifier !== "bench") return null;
    const [pair] = await ctx.getActorKeyPairs(identifier);
    return new Person({
      id: ctx.getActorUri(identifier),
      preferredUsername: identifier,
      inbox: ctx.getInboxUri(identifier),
      publicKey: pair.cryptographicKey,
    });
  })
  .setKeyPairsDispatcher((_ctx, identifier) => (identifier === "bench" ? [keyPair] : []));
// bench/inbox: every Create(Note) is stored in one table, once (the work is deliberately less
// than upstream Hollo's, which also stores accounts, mentions and timelines).
federation
  .setInboxListeners("/users/{identifier}/inbox", "/inbox")
  .on(Create, async (_ctx, create) => {
    const object = await create.getObject();
    if (!(object instanceof Note) || object.id == null) return;
    await sql`INSERT INTO bench_notes (id, content) VALUES (${object.id.href},
              ${object.content?.toString() ?? null}) ON CONFLICT DO NOTHING`;
  });

if (role === "worker") {
  const controller = new AbortController();
  process.on("SIGTERM", () => controller.abort());
  // The queue's LISTEN connection fails once the pool closes; that is the shutdown, not news.
  process.on("unhandledRejection", (e) => {
    if (!controller.signal.aborted) throw e;
  });
  // startQueue resolves when the signal aborts; `ready` once the listeners are set up.
  const running = federation.startQueue(undefined, { signal: controller.signal });
  console.log("ready");
  await running.catch(() => {});
  await sql.end({ timeout: 5 });
  process.exit(0);
}

await sql`CREATE TABLE IF NOT EXISTS bench_notes (id text PRIMARY KEY, content text)`;
const recipients = JSON.parse(await readFile(process.env.RECIPIENTS ?? "/dev/null", "utf8") || "[]").map((r) => ({
  id: new URL(r.id),
  inboxId: new URL(r.inbox),
  endpoints: r.sharedInbox ? { sharedInbox: new URL(r.sharedInbox) } : null,
}));

async function publish(request) {
  const ctx = federation.createContext(request, undefined);
  const id = randomUUID();
  const note = new URL(`/users/bench/notes/${id}`, origin);
  await ctx.sendActivity(
    { identifier: "bench" },
    recipients,
    new Create({
      id: new URL(`${note.href}/activity`),
      actor: ctx.getActorUri("bench"),
      to: PUBLIC_COLLECTION,
      object: new Note({
        id: note,
        attribution: ctx.getActorUri("bench"),
        to: PUBLIC_COLLECTION,
        content: "<p>fan-out bench</p>",
        published: Temporal.Now.instant(),
      }),
    }),
    { preferSharedInbox: true },
  );
  return new Response(JSON.stringify({ id: note.href, recipients: recipients.length }), {
    status: 202,
    headers: { "content-type": "application/json" },
  });
}

const server = serve(
  {
    port: Number(process.env.PORT ?? "0"),
    hostname: "127.0.0.1",
    fetch: (request) =>
      new URL(request.url).pathname === "/publish" && request.method === "POST"
        ? publish(request)
        : federation.fetch(request, { contextData: undefined }),
  },
  (info) => console.log(`ready ${info.port}`),
);
process.on("SIGTERM", () => {
  server.close();
  sql.end({ timeout: 5 }).then(() => process.exit(0));
});
