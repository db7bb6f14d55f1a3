-- Direct conversations (issue 19 item 6, R-MAPI-4; Mastodon's /api/v1/conversations): per
-- local participant, one conversation per thread (keyed by the thread's root IRI), the
-- direct posts in it, the other participants and whether it is unread. A page of
-- conversations is a backward scan of (account_id, last_status_id), as Mastodon orders them.
CREATE TABLE conversations (
    id              bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    account_id      uuid        NOT NULL REFERENCES accounts (id) ON DELETE CASCADE,
    root_uri        text        NOT NULL,
    last_status_id  uuid        NOT NULL,
    participants    text[]      NOT NULL,   -- actor IRIs besides the account's own
    unread          boolean     NOT NULL DEFAULT true,
    UNIQUE (account_id, root_uri)
);
CREATE INDEX conversations_page ON conversations (account_id, last_status_id);

CREATE TABLE conversation_posts (
    conversation_id  bigint NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    post_id          uuid   NOT NULL,
    PRIMARY KEY (conversation_id, post_id)
);
CREATE INDEX conversation_posts_post ON conversation_posts (post_id);
