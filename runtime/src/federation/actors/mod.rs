//! Actors: remote actors fetched and cached (`actor`), every account a client can name
//! (`directory`), WebFinger, the instance actor, and our local accounts' actor documents and
//! profiles.

pub mod actor;
pub mod directory;
pub mod instance;
pub mod links;
pub mod profiles;
pub mod webfinger;
