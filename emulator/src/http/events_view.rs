//! The `events.k8s.io/v1` view of stored core `v1` Events: field renames in both directions, as
//! kube-apiserver's conversion functions do, so an Event recorded through either API is visible
//! through both (`kubectl describe` reads core events; kube-rs's `Recorder` writes the new API).

use serde_json::{Map, Value};

use crate::api::ApiResource;

/// (core v1 field, events.k8s.io/v1 field)
const RENAMES: [(&str, &str); 8] = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("reportingComponent", "reportingController"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("eventTime", "eventTime"),
];

/// Whether `resource` is the events.k8s.io view.
pub fn is_events_v1(resource: &ApiResource) -> bool {
    resource.group == "events.k8s.io"
}

/// A stored (core) event as the events.k8s.io/v1 API shows it.
pub fn to_events_v1(core: &Value) -> Value {
    let Value::Object(map) = core else {
        return core.clone();
    };
    let mut out = rename(map, |core_name| {
        RENAMES
            .iter()
            .find(|(c, _)| *c == core_name)
            .map(|(_, v1)| *v1)
    });
    // Unlike core's, the events.k8s.io/v1 reporter strings are `omitempty`.
    for field in ["reportingController", "reportingInstance"] {
        if out.get(field).and_then(Value::as_str) == Some("") {
            out.remove(field);
        }
    }
    out.insert("apiVersion".into(), "events.k8s.io/v1".into());
    out.insert("kind".into(), "Event".into());
    Value::Object(out)
}

/// An events.k8s.io/v1 event in the stored (core) form.
pub fn from_events_v1(v1: &Value) -> Value {
    let Value::Object(map) = v1 else {
        return v1.clone();
    };
    let mut out = rename(map, |v1_name| {
        RENAMES.iter().find(|(_, v)| *v == v1_name).map(|(c, _)| *c)
    });
    out.insert("apiVersion".into(), "v1".into());
    out.insert("kind".into(), "Event".into());
    Value::Object(out)
}

fn rename(
    map: &Map<String, Value>,
    lookup: impl Fn(&str) -> Option<&'static str>,
) -> Map<String, Value> {
    map.iter()
        .map(|(k, v)| {
            (
                lookup(k).map_or_else(|| k.clone(), str::to_string),
                v.clone(),
            )
        })
        .collect()
}

/// Converts a stored object to the view `resource` serves.
pub fn present(resource: &ApiResource, stored: &Value) -> Value {
    if is_events_v1(resource) {
        to_events_v1(stored)
    } else {
        stored.clone()
    }
}

/// Converts a request body in the view `resource` serves to the stored form.
pub fn accept(resource: &ApiResource, body: Value) -> Value {
    if is_events_v1(resource) {
        from_events_v1(&body)
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_between_core_and_events_v1() {
        let v1 = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e"},
            "regarding": {"kind": "Node", "name": "n1"}, "note": "hello", "reason": "NodeReady",
            "reportingController": "nodepulse", "series": {"count": 2}});
        let core = from_events_v1(&v1);
        assert_eq!(core["involvedObject"]["name"], "n1");
        assert_eq!(core["message"], "hello");
        assert_eq!(core["reportingComponent"], "nodepulse");
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(to_events_v1(&core), v1);
    }

    #[test]
    fn empty_reporter_strings_are_omitted_from_the_events_v1_view_only() {
        let core = json!({"regarding": {}, "reportingComponent": "", "reportingInstance": "",
            "eventTime": null, "firstTimestamp": null});
        let v1 = to_events_v1(&core);
        assert_eq!(v1.get("reportingController"), None);
        assert_eq!(v1.get("reportingInstance"), None);
        assert_eq!(v1["eventTime"], Value::Null);
        assert_eq!(v1.get("deprecatedFirstTimestamp"), Some(&Value::Null));
    }
}
