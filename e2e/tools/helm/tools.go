//go:build tools

// Package helm pins the Helm CLI that Keyward's chart tests run.
package helm

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
