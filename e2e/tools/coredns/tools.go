//go:build tools

// Package coredns pins the CoreDNS release that serves cluster DNS on Keyward's one-node
// cluster (e2e/scripts/node.sh). Nothing here is imported by Keyward.
package coredns

import (
	_ "github.com/coredns/coredns"
)
