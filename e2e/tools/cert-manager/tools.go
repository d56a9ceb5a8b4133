//go:build tools

// Package certmanager pins the cert-manager release whose CRDs Keyward's chart tests install.
package certmanager

import (
	_ "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
)
