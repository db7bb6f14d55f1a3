// Emoji reactions and quotes (R-MAPI-6, issue 32 items 2 and 3) driven by megalodon's Pleroma
// client, a client library someone else wrote: createEmojiReaction / getEmojiReactions /
// deleteEmojiReaction (Pleroma's `…/pleroma/statuses/{id}/reactions/{emoji}` routes) and
// postStatus({quote_id}). megalodon converts every answer with its own Pleroma converter,
// which reads `pleroma.emoji_reactions` and `pleroma.quote_id`.
//
//   node reactions_flow.mjs BASE_URL AUTHOR_TOKEN REACTOR_TOKEN
import generator from "megalodon";

const [base, authorToken, reactorToken] = process.argv.slice(2);
if (!base || !authorToken || !reactorToken) {
  console.error("usage: reactions_flow.mjs BASE_URL AUTHOR_TOKEN REACTOR_TOKEN");
  process.exit(2);
}
const fail = (message) => {
  console.error(`FAILED: ${message}`);
  process.exit(1);
};
const check = (condition, message) => condition || fail(message);

const author = generator("pleroma", base, authorToken);
const reactor = generator("pleroma", base, reactorToken);

const post = (await author.postStatus("react to me, megalodon")).data;
check(Array.isArray(post.emoji_reactions) && post.emoji_reactions.length === 0, `fresh: ${JSON.stringify(post.emoji_reactions)}`);

const reacted = (await reactor.createEmojiReaction(post.id, "👍")).data;
const thumbs = reacted.emoji_reactions.find((r) => r.name === "👍");
check(thumbs && thumbs.count === 1 && thumbs.me === true, `after react: ${JSON.stringify(reacted.emoji_reactions)}`);
const seen = (await author.getStatus(post.id)).data.emoji_reactions;
check(seen.length === 1 && seen[0].me === false, `the author's view: ${JSON.stringify(seen)}`);
const listed = (await author.getEmojiReactions(post.id)).data;
check(listed.length === 1 && listed[0].accounts?.length === 1, `listed: ${JSON.stringify(listed)}`);
console.log("reactions_flow: reacted", { count: thumbs.count });

const undone = (await reactor.deleteEmojiReaction(post.id, "👍")).data;
check(undone.emoji_reactions.length === 0, `after unreact: ${JSON.stringify(undone.emoji_reactions)}`);

const quoting = (await reactor.postStatus("quoting, megalodon", { quote_id: post.id })).data;
check(quoting.quote?.quoted_status_id === post.id, `quote: ${JSON.stringify(quoting.quote)}`);
console.log("reactions_flow: all steps passed");
