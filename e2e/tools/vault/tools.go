//go:build tools

// Package vault pins the Vault server that Keyward's Vault provider tests run.
package vault

import (
	_ "github.com/hashicorp/vault"
)
