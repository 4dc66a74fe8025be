//! A pod's `volumeMounts` subPaths as kube-apiserver's `ValidateVolumeMounts` checks them:
//! `subPath` and `subPathExpr` each relative and without a `..` element, and never both on one
//! mount (the field paths are the apiserver's, `volumeMounts.subPath` without the index
//! included). The node expands `subPathExpr` and checks the result again.

use serde_json::{Value, json};

use crate::api::FieldError;

/// The subPath errors of every container and init container of `pod`.
pub fn validate(pod: &Value, errors: &mut Vec<FieldError>) {
    for list in ["containers", "initContainers"] {
        let containers = pod
            .pointer(&format!("/spec/{list}"))
            .and_then(Value::as_array);
        for (index, container) in containers.into_iter().flatten().enumerate() {
            let field = format!("spec.{list}[{index}].volumeMounts");
            let mounts = container.get("volumeMounts").and_then(Value::as_array);
            for (position, mount) in mounts.into_iter().flatten().enumerate() {
                validate_mount(mount, &field, position, errors);
            }
        }
    }
}

fn validate_mount(mount: &Value, field: &str, position: usize, errors: &mut Vec<FieldError>) {
    let text = |name: &str| mount.get(name).and_then(Value::as_str).unwrap_or_default();
    let (sub_path, expr) = (text("subPath"), text("subPathExpr"));
    if !sub_path.is_empty() {
        local_descending(sub_path, &format!("{field}.subPath"), errors);
    }
    if !expr.is_empty() {
        if !sub_path.is_empty() {
            errors.push(FieldError::invalid(
                &format!("{field}[{position}].subPathExpr"),
                &json!(expr),
                "subPathExpr and subPath are mutually exclusive",
            ));
        }
        local_descending(expr, &format!("{field}.subPathExpr"), errors);
    }
}

/// `validateLocalDescendingPath`.
fn local_descending(path: &str, field: &str, errors: &mut Vec<FieldError>) {
    if path.starts_with('/') {
        errors.push(FieldError::invalid(
            field,
            &json!(path),
            "must be a relative path",
        ));
    }
    if path.split('/').any(|part| part == "..") {
        errors.push(FieldError::invalid(
            field,
            &json!(path),
            "must not contain '..'",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors_of(mount: Value) -> Vec<(String, String)> {
        let pod = json!({"spec": {
            "containers": [{"name": "a", "volumeMounts": [{"name": "v", "mountPath": "/ok"}, mount]}],
        }});
        let mut errors = Vec::new();
        validate(&pod, &mut errors);
        errors.into_iter().map(|e| (e.field, e.message)).collect()
    }

    #[test]
    fn sub_paths_must_descend_and_sub_path_expr_excludes_sub_path_with_the_apiservers_texts() {
        let field = "spec.containers[0].volumeMounts";
        let cases = [
            (json!({"subPath": "logs/a"}), vec![]),
            (json!({"subPathExpr": "$(POD_NAME)"}), vec![]),
            (
                json!({"subPath": "/abs/../x"}),
                vec![
                    (
                        format!("{field}.subPath"),
                        "Invalid value: \"/abs/../x\": must be a relative path",
                    ),
                    (
                        format!("{field}.subPath"),
                        "Invalid value: \"/abs/../x\": must not contain '..'",
                    ),
                ],
            ),
            (
                json!({"subPath": "a", "subPathExpr": "../$(X)"}),
                vec![
                    (
                        format!("{field}[1].subPathExpr"),
                        "Invalid value: \"../$(X)\": subPathExpr and subPath are mutually exclusive",
                    ),
                    (
                        format!("{field}.subPathExpr"),
                        "Invalid value: \"../$(X)\": must not contain '..'",
                    ),
                ],
            ),
        ];
        for (fields, expected) in cases {
            let mut mount = json!({"name": "v", "mountPath": "/m"});
            mount
                .as_object_mut()
                .unwrap()
                .extend(fields.as_object().unwrap().clone());
            let expected: Vec<(String, String)> = expected
                .into_iter()
                .map(|(field, message)| (field, message.to_owned()))
                .collect();
            assert_eq!(errors_of(mount), expected, "{fields}");
        }
    }
}
