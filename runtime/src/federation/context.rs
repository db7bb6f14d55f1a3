//! The JSON-LD `@context` of every document we serve or send: ActivityStreams, security v1
//! (`publicKey`, `owner`, `publicKeyPem`), and the extension terms we use that neither
//! defines. Peers that process documents as JSON-LD (Fedify and others) drop a term the
//! context does not define — the ActivityStreams context maps it to a blank node — so a term
//! missing here is data lost on their side, silently. `tests/jsonld.rs` expands every kind of
//! document we produce with jsonld.js and fails on any such term.
//!
//! One context for every document, as Mastodon does: the extension map is small, and a single
//! definition cannot drift between the actor, the notes and the activities.

use serde_json::{Value, json};

pub const AS_CONTEXT: &str = "https://www.w3.org/ns/activitystreams";
pub const SECURITY_CONTEXT: &str = "https://w3id.org/security/v1";

/// The `@context` value of our documents.
pub fn ld() -> Value {
    json!([
        AS_CONTEXT,
        SECURITY_CONTEXT,
        {
            // Terms in the `as:` namespace that the ActivityStreams context does not define
            // (Mastodon's extensions, now listed in the ActivityStreams namespace).
            "manuallyApprovesFollowers": "as:manuallyApprovesFollowers",
            "sensitive": "as:sensitive",
            "Hashtag": "as:Hashtag",
            // Mastodon's own namespace, never served as a document: always inlined.
            "toot": "http://joinmastodon.org/ns#",
            "discoverable": "toot:discoverable",
            "indexable": "toot:indexable",
            "votersCount": "toot:votersCount",
            "featured": { "@id": "toot:featured", "@type": "@id" },
            "featuredTags": { "@id": "toot:featuredTags", "@type": "@id" },
            "Emoji": "toot:Emoji",
            // Emoji reactions, in LitePub's namespace as Pleroma, Misskey and Fedify send them.
            "litepub": "http://litepub.social/ns#",
            "EmojiReact": "litepub:EmojiReact",
            // Quote posts (FEP-044f), with the terms Misskey and Fedibird read, and the
            // interaction policy (GoToSocial's namespace, as Mastodon 4.5 sends it).
            "QuoteRequest": "https://w3id.org/fep/044f#QuoteRequest",
            "QuoteAuthorization": "https://w3id.org/fep/044f#QuoteAuthorization",
            "quote": { "@id": "https://w3id.org/fep/044f#quote", "@type": "@id" },
            "quoteAuthorization": { "@id": "https://w3id.org/fep/044f#quoteAuthorization", "@type": "@id" },
            "quoteUri": "http://fedibird.com/ns#quoteUri",
            "_misskey_quote": "https://misskey-hub.net/ns#_misskey_quote",
            "gts": "https://gotosocial.org/ns#",
            "interactionPolicy": { "@id": "gts:interactionPolicy", "@type": "@id" },
            "canLike": { "@id": "gts:canLike", "@type": "@id" },
            "canReply": { "@id": "gts:canReply", "@type": "@id" },
            "canAnnounce": { "@id": "gts:canAnnounce", "@type": "@id" },
            "canQuote": { "@id": "gts:canQuote", "@type": "@id" },
            "automaticApproval": { "@id": "gts:automaticApproval", "@type": "@id" },
            "manualApproval": { "@id": "gts:manualApproval", "@type": "@id" },
            // GoToSocial 0.18's names for the two above.
            "always": { "@id": "gts:always", "@type": "@id" },
            "approvalRequired": { "@id": "gts:approvalRequired", "@type": "@id" },
            // The author's approval of a reply or boost of ours (GoToSocial's
            // interaction policies: `approvals`).
            "approvedBy": { "@id": "gts:approvedBy", "@type": "@id" },
            // Our approvals of remote interactions with our posts (`approvals::granted`).
            "LikeApproval": "gts:LikeApproval",
            "ReplyApproval": "gts:ReplyApproval",
            "AnnounceApproval": "gts:AnnounceApproval",
            "interactingObject": { "@id": "gts:interactingObject", "@type": "@id" },
            "interactionTarget": { "@id": "gts:interactionTarget", "@type": "@id" },
            // Media `Document`s of a note's `attachment` (Mastodon's terms).
            "blurhash": "toot:blurhash",
            "focalPoint": { "@container": "@list", "@id": "toot:focalPoint" },
            // Profile fields (`attachment` of an actor), as Mastodon defines them.
            "schema": "http://schema.org#",
            "PropertyValue": "schema:PropertyValue",
            "value": "schema:value",
            // FEP-8b32: the actor's proof key (`assertionMethod` Multikey) and the proofs on
            // our activities, in the security vocabulary, as the Data Integrity and Multikey
            // contexts define them (inlined: those documents are not fetched by every peer).
            "assertionMethod": { "@id": "sec:assertionMethod", "@type": "@id", "@container": "@set" },
            "Multikey": "sec:Multikey",
            "controller": { "@id": "sec:controller", "@type": "@id" },
            "publicKeyMultibase": { "@id": "sec:publicKeyMultibase", "@type": "sec:multibase" },
            "proof": { "@id": "sec:proof", "@type": "@id", "@container": "@graph" },
            "DataIntegrityProof": "sec:DataIntegrityProof",
            "cryptosuite": { "@id": "sec:cryptosuite", "@type": "sec:cryptosuiteString" },
            "proofValue": { "@id": "sec:proofValue", "@type": "sec:multibase" },
            "proofPurpose": { "@id": "sec:proofPurpose", "@type": "@vocab" },
            "verificationMethod": { "@id": "sec:verificationMethod", "@type": "@id" },
        }
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_names_both_documents_then_our_terms() {
        let c = ld();
        assert_eq!(c[0], AS_CONTEXT);
        assert_eq!(c[1], SECURITY_CONTEXT);
        for term in [
            "votersCount",
            "discoverable",
            "manuallyApprovesFollowers",
            "Hashtag",
            "blurhash",
            "focalPoint",
        ] {
            assert!(c[2].get(term).is_some(), "{term}");
        }
    }
}
