//! The controller class: the label that assigns an object to one reconciler instance
//! (`--controller-class`). Process wiring (`run.rs`, the filtered watches) and the controllers
//! (which skip what another class owns) both read it here, so neither imports the other for it.

use kube::{Resource, ResourceExt};

/// Label that assigns an object to one reconciler instance.
pub const CONTROLLER_CLASS_LABEL: &str = "external-secrets.io/controller-class";

/// Whether `obj` belongs to this instance's controller class (every object when none is set).
pub fn of_class(obj: &impl Resource, class: Option<&str>) -> bool {
    class.is_none_or(|c| obj.labels().get(CONTROLLER_CLASS_LABEL).map(String::as_str) == Some(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use keyward_crds::{ExternalSecret, ExternalSecretSpec};

    #[test]
    fn an_object_is_of_the_class_its_label_names_and_every_object_of_no_class() {
        let mut es = ExternalSecret::new("a", ExternalSecretSpec::default());
        assert!(of_class(&es, None));
        assert!(!of_class(&es, Some("blue")), "an unlabelled object belongs to no class");
        es.labels_mut().insert(CONTROLLER_CLASS_LABEL.into(), "blue".into());
        assert!(of_class(&es, Some("blue")));
        assert!(!of_class(&es, Some("green")));
        assert!(of_class(&es, None));
    }
}
