//! One invalid field as apimachinery's `field.Error` prints it, with the constructors the
//! validation rules use. A value type only: the emulator turns a list of them into an Invalid
//! `Status`, the node into one error message.

use serde_json::Value;

/// One invalid field, as in `field.Error` (`metadata.uid: Invalid value: "x": field is immutable`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The cause `reason`: `FieldValueInvalid`, `FieldValueRequired`, ...
    pub reason: &'static str,
    /// The field path, `metadata.name`.
    pub field: String,
    /// The message without the field path: `Invalid value: "x": field is immutable`.
    pub message: String,
}

impl FieldError {
    /// `Invalid value: <value>: <detail>`.
    pub fn invalid(field: &str, value: &Value, detail: &str) -> Self {
        let shown = match value {
            Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        Self::invalid_shown(field, &shown, detail)
    }

    /// `Invalid value: <shown>: <detail>` with the value already printed as Go prints it (a
    /// `uint64` zero is `%#v`-printed as `0x0`, for example).
    pub fn invalid_shown(field: &str, shown: &str, detail: &str) -> Self {
        FieldError {
            reason: "FieldValueInvalid",
            field: field.to_string(),
            message: format!("Invalid value: {shown}: {detail}"),
        }
    }

    /// `field.TooLong`: `Too long: may not be more than <max> bytes` (the value is omitted).
    pub fn too_long(field: &str, max: usize) -> Self {
        FieldError {
            reason: "FieldValueTooLong",
            field: field.to_string(),
            message: format!("Too long: may not be more than {max} bytes"),
        }
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(field: &str, detail: &str) -> Self {
        FieldError {
            reason: "FieldValueForbidden",
            field: field.to_string(),
            message: format!("Forbidden: {detail}"),
        }
    }

    /// `Duplicate value: "<value>"`.
    pub fn duplicate(field: &str, value: &str) -> Self {
        FieldError {
            reason: "FieldValueDuplicate",
            field: field.to_string(),
            message: format!("Duplicate value: {value:?}"),
        }
    }

    /// `field.NotFound`: `Not found: "<value>"`.
    pub fn not_found(field: &str, value: &str) -> Self {
        FieldError {
            reason: "FieldValueNotFound",
            field: field.to_string(),
            message: format!("Not found: {value:?}"),
        }
    }

    /// `Required value: <detail>`.
    pub fn required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        FieldError {
            reason: "FieldValueRequired",
            field: field.to_string(),
            message,
        }
    }

    /// `field: message`, as `field.Error` prints itself.
    pub fn render(&self) -> String {
        format!("{}: {}", self.field, self.message)
    }
}
