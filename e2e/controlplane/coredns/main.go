// CoreDNS with only the plugins the real node's Corefile uses (e2e/node: bind, errors,
// kubernetes, forward, cache), as CoreDNS documents for builds with a chosen plugin set
// ("external golang source code": coremain plus the plugins' packages). Upstream's main imports
// core/plugin, which registers every plugin and with them the AWS, Azure and Google Cloud SDKs,
// etcd and the tracing clients: most of what a cold build compiled for a DNS server that only
// answers for cluster.local.
package main

import (
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
