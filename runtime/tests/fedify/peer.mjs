// The Fedify peer of runtime/tests/fedify_interop.rs: an ActivityPub server built on Fedify
// (pinned in package.json), an implementation we did not write, that parses everything it
// receives with Fedify's own vocabulary classes (JSON-LD processing included) and reports
// what it understood. One actor, `fedi`; MemoryKvStore and no queue, so every send is done
// (or has failed) when its control request answers; Fedify signs as it does by default.
//
//   PORT=… node peer.mjs      prints `ready <port>` once listening on 127.0.0.1
//
// Control API (JSON in, JSON out):
//   POST /control/follow {actor}               sends Follow(actor) from fedi
//   POST /control/vote {question, choice}      sends Create(Note{name: choice, inReplyTo})
//                                               to the question's author, as Mastodon votes
//   POST /control/note {to, content, quote?, public?}
//                                               sends Create(Note) mentioning and addressed to `to`;
//                                               `quote` sets Fedify's quoteUrl (which it sends as
//                                               quoteUrl, _misskey_quote and quoteUri), `public`
//                                               addresses it to the public too (issue 32 item 2)
//   POST /control/react {object, emoji}        sends EmojiReact(object, content: emoji) to the
//                                               object's author (issue 32 item 3)
//   POST /control/unreact {object, id}         sends the Undo of that EmojiReact
//   POST /control/featured {actor}             reads the actor's `featured` and `featuredTags`
//                                               collections with Fedify: {featured: [ids],
//                                               tags: [names]}
//   GET  /control/received                     what the inbox listeners parsed, in order
//   GET  /control/inbox-requests               each POST to an inbox: its signature scheme
//                                               (rfc9421 / draft-cavage / none), our answer,
//                                               and Fedify's verdict on its integrity proof
import { randomUUID } from "node:crypto";
import {
  Accept,
  Activity,
  Add,
  Collection,
  Create,
  Emoji,
  EmojiReact,
  Endpoints,
  Follow,
  Hashtag,
  Mention,
  MemoryKvStore,
  Note,
  PUBLIC_COLLECTION,
  Person,
  Question,
  Remove,
  Undo,
  Update,
  createFederation,
  generateCryptoKeyPair,
  verifyObject,
} from "@fedify/fedify";
import { serve } from "@hono/node-server";

const port = Number(process.env.PORT ?? "0");
if (!Number.isInteger(port) || port <= 0) {
  console.error("peer: PORT must be set to a free port");
  process.exit(2);
}
const origin = `http://127.0.0.1:${port}`;
const ME = "fedi";
const keyPairs = [
  await generateCryptoKeyPair("RSASSA-PKCS1-v1_5"),
  await generateCryptoKeyPair("Ed25519"),
];

const federation = createFederation({
  kv: new MemoryKvStore(),
  allowPrivateAddress: true,
  origin,
});

federation
  .setActorDispatcher("/users/{identifier}", async (ctx, identifier) => {
    if (identifier !== ME) return null;
    const keys = await ctx.getActorKeyPairs(identifier);
    return new Person({
      id: ctx.getActorUri(identifier),
      preferredUsername: identifier,
      name: "Fedify peer",
      inbox: ctx.getInboxUri(identifier),
      endpoints: new Endpoints({ sharedInbox: ctx.getInboxUri() }),
      publicKey: keys[0].cryptographicKey,
      assertionMethods: keys.map((k) => k.multikey),
    });
  })
  .setKeyPairsDispatcher((_ctx, identifier) => (identifier === ME ? keyPairs : []));
// WebFinger answers for `acct:fedi@127.0.0.1:<port>` through the actor dispatcher.

/** Everything the inbox listeners parsed, in arrival order. */
const received = [];
/** Each POST to an inbox of the peer: how it was signed and what Fedify answered. */
const inboxRequests = [];
const iri = (u) => u?.href ?? null;

async function tagsOf(object) {
  const tags = [];
  for await (const tag of object.getTags()) {
    if (tag instanceof Hashtag) tags.push({ type: "Hashtag", name: tag.name?.toString() ?? null, href: iri(tag.href) });
    else if (tag instanceof Mention) tags.push({ type: "Mention", name: tag.name?.toString() ?? null, href: iri(tag.href) });
    else if (tag instanceof Emoji) {
      const icon = await tag.getIcon();
      const url = icon?.url instanceof URL ? icon.url : icon?.url?.href;
      tags.push({ type: "Emoji", name: tag.name?.toString() ?? null, icon: iri(url) });
    }
    else tags.push({ type: tag?.constructor?.name ?? "unknown" });
  }
  return tags;
}

async function optionsOf(question, which) {
  const out = [];
  const iter = which === "oneOf" ? question.getExclusiveOptions() : question.getInclusiveOptions();
  for await (const option of iter) {
    const replies = await option.getReplies();
    out.push({
      type: option.constructor.name,
      name: option.name?.toString() ?? null,
      votes: replies instanceof Collection ? replies.totalItems : null,
    });
  }
  return out;
}

/** An actor's `icon`/`image` as Fedify parsed it: its media type and URL, or null. */
async function imageOf(image) {
  if (image == null) return null;
  const url = image.url instanceof URL ? image.url : image.url?.href;
  return { type: image.constructor?.name ?? null, mediaType: image.mediaType ?? null, url: iri(url) };
}

/** The parsed view of a Note, a Question or an actor. */
async function describe(object) {
  if (object instanceof Question) {
    return {
      type: "Question",
      id: iri(object.id),
      attributedTo: iri(object.attributionId),
      content: object.content?.toString() ?? null,
      oneOf: await optionsOf(object, "oneOf"),
      anyOf: await optionsOf(object, "anyOf"),
      votersCount: object.voters,
      endTime: object.endTime?.toString() ?? null,
      closed: object.closed == null ? null : object.closed.toString(),
      to: object.toIds.map(iri),
      cc: object.ccIds.map(iri),
    };
  }
  if (object instanceof Note) {
    return {
      type: "Note",
      id: iri(object.id),
      attributedTo: iri(object.attributionId),
      content: object.content?.toString() ?? null,
      url: iri(object.url instanceof URL ? object.url : object.url?.href),
      inReplyTo: iri(object.replyTargetId),
      quoteUrl: iri(object.quoteUrl),
      tags: await tagsOf(object),
      to: object.toIds.map(iri),
      cc: object.ccIds.map(iri),
    };
  }
  if (object instanceof Person) {
    // An actor's Update (issue 30 item 2): the avatar and header as Fedify reads them.
    return {
      type: "Person",
      id: iri(object.id),
      name: object.name?.toString() ?? null,
      icon: await imageOf(await object.getIcon()),
      image: await imageOf(await object.getImage()),
    };
  }
  return { type: object?.constructor?.name ?? null, id: iri(object?.id) };
}

federation
  .setInboxListeners("/users/{identifier}/inbox", "/inbox")
  .on(Follow, async (ctx, follow) => {
    const follower = await follow.getActor();
    received.push({ type: "Follow", id: iri(follow.id), actor: iri(follow.actorId), object: iri(follow.objectId) });
    if (follower == null || follow.objectId?.href !== ctx.getActorUri(ME).href) return;
    await ctx.sendActivity(
      { identifier: ME },
      follower,
      new Accept({
        id: new URL(`${origin}/accepts/${randomUUID()}`),
        actor: ctx.getActorUri(ME),
        object: follow,
      }),
    );
  })
  .on(Accept, async (_ctx, accept) => {
    const object = await accept.getObject();
    received.push({
      type: "Accept",
      id: iri(accept.id),
      actor: iri(accept.actorId),
      object: object instanceof Follow
        ? { type: "Follow", id: iri(object.id), actor: iri(object.actorId), object: iri(object.objectId) }
        : { type: object?.constructor?.name ?? null, id: iri(accept.objectId) },
    });
  })
  .on(Create, async (_ctx, create) => {
    const object = await create.getObject();
    received.push({ type: "Create", id: iri(create.id), actor: iri(create.actorId), object: await describe(object) });
  })
  .on(Update, async (_ctx, update) => {
    const object = await update.getObject();
    received.push({ type: "Update", id: iri(update.id), actor: iri(update.actorId), object: await describe(object) });
  })
  .on(Add, async (_ctx, add) => {
    received.push({ type: "Add", id: iri(add.id), actor: iri(add.actorId), object: iri(add.objectId), target: iri(add.targetId) });
  })
  .on(Remove, async (_ctx, remove) => {
    received.push({ type: "Remove", id: iri(remove.id), actor: iri(remove.actorId), object: iri(remove.objectId), target: iri(remove.targetId) });
  })
  .on(EmojiReact, async (_ctx, react) => {
    received.push({
      type: "EmojiReact",
      id: iri(react.id),
      actor: iri(react.actorId),
      object: iri(react.objectId),
      content: react.content?.toString() ?? null,
      tags: await tagsOf(react),
    });
  })
  .on(Undo, async (_ctx, undo) => {
    const object = await undo.getObject();
    received.push({
      type: "Undo",
      id: iri(undo.id),
      actor: iri(undo.actorId),
      object: iri(undo.objectId),
      objectType: object?.constructor?.name ?? null,
    });
  })
  .onError((_ctx, error) => {
    received.push({ type: "error", error: String(error?.stack ?? error) });
  });

const json = (value, status = 200) =>
  new Response(JSON.stringify(value), { status, headers: { "content-type": "application/json" } });

/** A remote object by IRI, through Fedify's document loader and vocabulary. */
async function lookup(ctx, url) {
  const object = await ctx.lookupObject(url);
  if (object == null) throw new Error(`lookup of ${url} found nothing`);
  return object;
}

/**
 * Fedify's own verdict on an incoming activity's Object Integrity Proof (FEP-8b32):
 * "verified" when `verifyObject` accepts it (the key fetched from the sender's actor
 * document, every attribution covered), "invalid" when it does not, "none" without a proof.
 * Fedify's inbox would fall back to the HTTP signature on an invalid proof, so only this
 * check shows whether the sender's proofs are right.
 */
async function checkProof(request) {
  try {
    const doc = JSON.parse(await request.clone().text());
    if (doc?.proof == null) return "none";
    const ctx = federation.createContext(request, undefined);
    const object = await verifyObject(Activity, doc, {
      documentLoader: ctx.documentLoader,
      contextLoader: ctx.contextLoader,
    });
    return object == null ? "invalid" : "verified";
  } catch (e) {
    return `error: ${e}`;
  }
}

async function control(request) {
  const path = new URL(request.url).pathname;
  if (request.method === "GET" && path === "/control/received") return json(received);
  if (request.method === "GET" && path === "/control/inbox-requests") return json(inboxRequests);
  if (request.method !== "POST") return json({ error: "not found" }, 404);
  const body = await request.json();
  const ctx = federation.createContext(request, undefined);
  const me = ctx.getActorUri(ME);
  if (path === "/control/follow") {
    const actor = await lookup(ctx, body.actor);
    const id = new URL(`${origin}/follows/${randomUUID()}`);
    await ctx.sendActivity({ identifier: ME }, actor, new Follow({ id, actor: me, object: actor.id }));
    return json({ id: id.href });
  }
  if (path === "/control/vote") {
    const question = await lookup(ctx, body.question);
    if (!(question instanceof Question)) return json({ error: `${body.question} is not a Question` }, 422);
    const author = await question.getAttribution();
    const note = new URL(`${origin}/votes/${randomUUID()}`);
    await ctx.sendActivity(
      { identifier: ME },
      author,
      new Create({
        id: new URL(`${note.href}/activity`),
        actor: me,
        to: author.id,
        object: new Note({ id: note, attribution: me, to: author.id, name: body.choice, replyTarget: question.id }),
      }),
    );
    return json({ id: note.href });
  }
  if (path === "/control/react" || path === "/control/unreact") {
    const object = await lookup(ctx, body.object);
    const author = await object.getAttribution();
    const react = (id) =>
      new EmojiReact({ id, actor: me, object: object.id, content: body.emoji, to: author.id });
    if (path === "/control/react") {
      const id = new URL(`${origin}/reacts/${randomUUID()}`);
      await ctx.sendActivity({ identifier: ME }, author, react(id));
      return json({ id: id.href });
    }
    await ctx.sendActivity(
      { identifier: ME },
      author,
      new Undo({ id: new URL(`${origin}/undos/${randomUUID()}`), actor: me, object: react(new URL(body.id)), to: author.id }),
    );
    return json({ id: body.id });
  }
  if (path === "/control/featured") {
    const actor = await lookup(ctx, body.actor);
    const featured = [];
    const pinned = await actor.getFeatured();
    if (pinned != null) {
      // `orderedItems` is `as:items` as a list in JSON-LD: Fedify reads it as the items.
      for await (const item of pinned.getItems()) featured.push({ type: item?.constructor?.name ?? null, id: iri(item?.id) });
    }
    const tags = [];
    const collection = await actor.getFeaturedTags();
    if (collection != null) {
      for await (const item of collection.getItems()) tags.push({ type: item?.constructor?.name ?? null, name: item?.name?.toString() ?? null });
    }
    return json({ featuredId: iri(actor.featuredId), featured, tags });
  }
  if (path === "/control/note") {
    const to = await lookup(ctx, body.to);
    const note = new URL(`${origin}/notes/${randomUUID()}`);
    await ctx.sendActivity(
      { identifier: ME },
      to,
      new Create({
        id: new URL(`${note.href}/activity`),
        actor: me,
        to: to.id,
        object: new Note({
          id: note,
          attribution: me,
          tos: body.public ? [PUBLIC_COLLECTION, to.id] : [to.id],
          content: body.content,
          tags: [new Mention({ href: to.id, name: body.mention ?? null })],
          quoteUrl: body.quote ? new URL(body.quote) : null,
        }),
      }),
    );
    return json({ id: note.href });
  }
  return json({ error: "not found" }, 404);
}

serve(
  {
    port,
    hostname: "127.0.0.1",
    fetch: async (request) => {
      const path = new URL(request.url).pathname;
      if (request.method === "POST" && path.endsWith("/inbox")) {
        const scheme = request.headers.has("signature-input")
          ? "rfc9421"
          : request.headers.has("signature") ? "draft-cavage" : "none";
        const proof = await checkProof(request);
        const response = await federation.fetch(request, { contextData: undefined });
        inboxRequests.push({ path, scheme, status: response.status, proof });
        return response;
      }
      if (path.startsWith("/control/")) {
        try {
          return await control(request);
        } catch (e) {
          return json({ error: String(e?.stack ?? e) }, 500);
        }
      }
      return federation.fetch(request, { contextData: undefined });
    },
  },
  (info) => console.log(`ready ${info.port}`),
);
