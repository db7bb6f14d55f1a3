//! ActivityStreams names the code compares against: the public collection and the object
//! types that are actors or posts. One definition, read by the inbox, search resolution, reply
//! collection and the documents we send.

/// The public collection, as `normalize` writes every spelling of it.
pub const PUBLIC: &str = "https://www.w3.org/ns/activitystreams#Public";

/// Object types that are actors.
pub const ACTOR_TYPES: [&str; 5] = ["Person", "Service", "Application", "Group", "Organization"];

/// Object types stored as posts.
pub const NOTE_TYPES: [&str; 4] = ["Note", "Article", "Question", "Page"];

/// Whether `ty` is an actor type.
pub fn is_actor(ty: &str) -> bool {
    ACTOR_TYPES.contains(&ty)
}

/// Whether `ty` is a type stored as a post.
pub fn is_note(ty: &str) -> bool {
    NOTE_TYPES.contains(&ty)
}
