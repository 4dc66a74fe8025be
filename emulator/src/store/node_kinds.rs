//! kube-apiserver's validation of `node.k8s.io/v1` RuntimeClasses (`ValidateRuntimeClass`,
//! `ValidateRuntimeClassUpdate`): the handler is required, a DNS-1123 label, and never changes.
//! Pure functions over JSON objects, called by the store's strategy.

use serde_json::{Value, json};

use nodepulse_validation::names::{DNS1123_LABEL_MESSAGE, is_label};

use crate::api::FieldError;

/// `ValidateRuntimeClass`: the handler.
pub fn validate(object: &Value, errors: &mut Vec<FieldError>) {
    let handler = object.get("handler").and_then(Value::as_str).unwrap_or("");
    if handler.is_empty() {
        errors.push(FieldError::required("handler", ""));
    } else if handler.len() > 63 || !is_label(handler) {
        errors.push(FieldError::invalid(
            "handler",
            &json!(handler),
            DNS1123_LABEL_MESSAGE,
        ));
    }
}

/// `ValidateRuntimeClassUpdate`: the handler is immutable.
pub fn validate_update(old: &Value, new: &Value, errors: &mut Vec<FieldError>) {
    if old.get("handler") != new.get("handler") {
        let handler = new.get("handler").cloned().unwrap_or(Value::Null);
        errors.push(FieldError::invalid(
            "handler",
            &handler,
            "field is immutable",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handler_is_required_and_a_dns_label() {
        let mut errors = Vec::new();
        validate(&json!({"metadata": {"name": "x"}}), &mut errors);
        validate(&json!({"handler": "Not_A_Label"}), &mut errors);
        validate(&json!({"handler": "runc"}), &mut errors);
        assert_eq!(errors.len(), 2, "{errors:?}");
    }

    #[test]
    fn the_handler_never_changes() {
        let mut errors = Vec::new();
        validate_update(
            &json!({"handler": "a"}),
            &json!({"handler": "a"}),
            &mut errors,
        );
        assert!(errors.is_empty());
        validate_update(
            &json!({"handler": "a"}),
            &json!({"handler": "b"}),
            &mut errors,
        );
        assert_eq!(errors.len(), 1);
    }
}
