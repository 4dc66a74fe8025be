//! List and watch filtering: label selectors and field selectors.

pub mod field;
pub mod label;

pub use field::FieldSelector;
pub use label::LabelSelector;

use serde_json::Value;

/// Both selectors of one request.
#[derive(Debug, Clone, Default)]
pub struct Selector {
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl Selector {
    /// Whether a stored object passes both selectors.
    pub fn matches(&self, object: &Value) -> bool {
        self.labels.matches(object.pointer("/metadata/labels")) && self.fields.matches(object)
    }
}
