// A tiny HTTP client for the real-node scenarios (issue 15): the Hollo images have no shell and
// no curl, and a static busybox cannot resolve cluster DNS names (glibc static NSS); Go's own
// resolver can. Standard library only.
module hollo.e2e/httpget

go 1.25.0
