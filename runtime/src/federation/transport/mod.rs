//! How we talk to other servers: the guarded fetch client (SSRF rules, limits, redirects), HTTP
//! Signatures in both schemes (draft-cavage, RFC 9421) and which one a host gets, connection
//! reuse, and the small time-bounded caches these keep.

pub mod fetch;
pub mod reuse;
pub mod rfc9421;
pub mod schemes;
pub mod signature;
pub mod ttl;
