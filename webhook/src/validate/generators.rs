//! Admission of the generator kinds (`generators.external-secrets.io/v1alpha1`): every generator
//! spec gets the rule the reconciler applies again before each generation
//! (`keyward_crds::rules::validate_generator_spec`: counts, sizes, what one generation may
//! produce, free-form fields), naming the field; a spec that is a SecretStore block (the
//! generator registry's `spec_is_store_block`: the Webhook generator's is
//! `spec.provider.webhook`) also gets that block's rules; a GeneratorState keeps its free-form fields within
//! their limits.

use keyward_crds::generators::{ClusterGenerator, GeneratorKind, GeneratorState};
use keyward_crds::rules::{
    cluster_generator_spec, generator_spec_field, read_generator_spec, spec_of_kind, validate_generator_spec,
    validate_generator_state,
};
use serde_json::Value;

use super::{Admitted, Check, Cx, Kind};

/// A namespaced generator of `kind`: its `spec` (a 400 naming the kind when it does not read).
pub(super) fn admit_generator(kind: GeneratorKind, spec: &Value, check: &mut Check) -> Result<(), String> {
    let generator = read_generator_spec(kind, spec).map_err(|e| format!("the {kind} cannot be read: {e}"))?;
    if let Some(any) = spec_of_kind(kind, &generator) {
        check.spec(validate_generator_spec("spec", any));
    }
    check.generator_store_block(kind, "spec", spec);
    Ok(())
}

impl Admitted for ClusterGenerator {
    const KIND: Kind = Kind::ClusterGenerator;

    fn check(&self, cx: &Cx<'_>, check: &mut Check) {
        let path = format!("spec.generator.{}", generator_spec_field(self.spec.kind));
        match cluster_generator_spec(&self.spec) {
            Ok(any) => check.spec(validate_generator_spec(&path, any)),
            Err(e) => check.invalid.push(e),
        }
        let field = format!("/generator/{}", generator_spec_field(self.spec.kind));
        if let Some(block) = cx.spec().and_then(|s| s.pointer(&field)) {
            check.generator_store_block(self.spec.kind, &path, block);
        }
    }
}

impl Admitted for GeneratorState {
    const KIND: Kind = Kind::GeneratorState;

    fn check(&self, _: &Cx<'_>, check: &mut Check) {
        check.spec(validate_generator_state(&self.spec));
    }
}
