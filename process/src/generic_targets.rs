//! The generic-target flags, taken alike by the reconciler and the webhook (the webhook warns
//! with the rule the reconciler applies, so both must see the same list).

/// `--generic-targets` (upstream's `--unsafe-allow-generic-targets` too) and
/// `--generic-target-resources`; read by `keyward_crds::rules::GenericTargets::from_flags`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct GenericTargetArgs {
    /// Write ExternalSecrets' `spec.target.manifest` objects (ConfigMaps, other namespaced kinds)
    /// of the resources listed in `--generic-target-resources`; off by default. Takes
    /// `--generic-targets`, `--generic-targets=true` and upstream's `--unsafe-allow-generic-targets`.
    #[arg(
        long = "generic-targets",
        alias = "unsafe-allow-generic-targets",
        env = "KEYWARD_GENERIC_TARGETS",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "true",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    pub generic_targets: bool,
    /// The resources generic targets may be written as, comma-separated as kubectl names them
    /// (`configmaps,appconfigs.config.example.com`).
    #[arg(long = "generic-target-resources", env = "KEYWARD_GENERIC_TARGET_RESOURCES", default_value = "")]
    pub generic_target_resources: String,
}
