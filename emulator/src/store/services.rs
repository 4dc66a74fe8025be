//! kube-apiserver's Service registry, for what nodes read of Services: create defaulting (type
//! `ClusterIP`, `TCP` ports whose `targetPort` is their port, `sessionAffinity: None`,
//! single-stack IPv4), a cluster IP from the service range unless one is asked for (`None`:
//! headless), the allocated addresses kept on update, the port rules, and the `kubernetes`
//! Service of `default` the control plane keeps. Pure: the store passes the addresses in use.

use std::{collections::BTreeSet, net::Ipv4Addr};

use serde_json::{Map, Value, json};

use super::strategy::object_entry;
use crate::api::FieldError;

/// The service range (`--service-cluster-ip-range`), as the local control plane's 10.0.0.0/24.
const RANGE_BASE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 0);
const RANGE_SIZE: u32 = 256;
/// The first address of the range, which the `kubernetes` Service always has.
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
pub const KUBERNETES_SERVICE: &str = "kubernetes";

/// Defaulting of a new Service (the API's `SetDefaults_Service` and the registry's).
pub fn prepare(service: &mut Map<String, Value>) {
    let spec = object_entry(service, "spec");
    spec.entry("type").or_insert(json!("ClusterIP"));
    spec.entry("sessionAffinity").or_insert(json!("None"));
    if spec.get("type").and_then(Value::as_str) != Some("ExternalName") {
        spec.entry("internalTrafficPolicy")
            .or_insert(json!("Cluster"));
        spec.entry("ipFamilies").or_insert(json!(["IPv4"]));
        spec.entry("ipFamilyPolicy").or_insert(json!("SingleStack"));
    }
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for port in ports.iter_mut().filter_map(Value::as_object_mut) {
            port.entry("protocol").or_insert(json!("TCP"));
            if let Some(number) = port.get("port").cloned() {
                port.entry("targetPort").or_insert(number);
            }
        }
    }
    service
        .entry("status")
        .or_insert(json!({"loadBalancer": {}}));
}

/// Gives a new Service its cluster IP: the one asked for if free (`None` as it is), else the
/// lowest free address of the range past the `kubernetes` one.
pub fn allocate(service: &mut Value, used: &BTreeSet<String>) -> Result<(), FieldError> {
    if service.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName") {
        return Ok(());
    }
    let asked = service
        .pointer("/spec/clusterIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())
        .map(str::to_owned);
    let ip = match asked {
        Some(none) if none == "None" => none,
        Some(ip) => {
            let parsed: Option<Ipv4Addr> = ip.parse().ok();
            let in_range = parsed
                .and_then(|p| u32::from(p).checked_sub(u32::from(RANGE_BASE)))
                .is_some_and(|offset| offset < RANGE_SIZE);
            if !in_range {
                return Err(FieldError::invalid(
                    "spec.clusterIPs",
                    &json!([ip]),
                    &format!(
                        "failed to allocate IP {ip}: the provided IP ({ip}) is not in the valid range. The range of valid IPs is {RANGE_BASE}/24"
                    ),
                ));
            }
            if used.contains(&ip) {
                return Err(FieldError::invalid(
                    "spec.clusterIPs",
                    &json!([ip]),
                    &format!("failed to allocate IP {ip}: provided IP is already allocated"),
                ));
            }
            ip
        }
        None => (2..RANGE_SIZE - 1)
            .map(|offset| Ipv4Addr::from(u32::from(RANGE_BASE) + offset).to_string())
            .find(|ip| !used.contains(ip))
            .ok_or_else(|| {
                FieldError::invalid(
                    "spec.clusterIPs",
                    &json!([]),
                    "failed to allocate IP: range is full",
                )
            })?,
    };
    if let Some(spec) = service.get_mut("spec").and_then(Value::as_object_mut) {
        spec.insert("clusterIP".into(), json!(ip));
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    Ok(())
}

/// An update keeps the allocated addresses when it leaves them out (the registry's
/// `patchAllocatedValues`).
pub fn keep_allocated(old: &Value, new: &mut Map<String, Value>) {
    let spec = object_entry(new, "spec");
    for field in ["clusterIP", "clusterIPs"] {
        let missing = spec
            .get(field)
            .is_none_or(|v| v.is_null() || v.as_str() == Some(""));
        if let (true, Some(value)) = (missing, old.pointer(&format!("/spec/{field}"))) {
            spec.insert(field.into(), value.clone());
        }
    }
}

/// `ValidateService`'s port rules: ports are required (but for headless Services), each in
/// 1–65535, and named when there are several.
pub fn validate(service: &Value, errors: &mut Vec<FieldError>) {
    let headless = service.pointer("/spec/clusterIP").and_then(Value::as_str) == Some("None");
    let external = service.pointer("/spec/type").and_then(Value::as_str) == Some("ExternalName");
    let ports = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if ports.is_empty() && !headless && !external {
        errors.push(FieldError::required("spec.ports", ""));
    }
    for (index, port) in ports.iter().enumerate() {
        let number = port.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&number) {
            errors.push(FieldError::invalid(
                &format!("spec.ports[{index}].port"),
                &json!(number),
                "must be between 1 and 65535, inclusive",
            ));
        }
        let named = port
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|name| !name.is_empty());
        if ports.len() > 1 && !named {
            errors.push(FieldError::required(
                &format!("spec.ports[{index}].name"),
                "",
            ));
        }
    }
}

/// The `kubernetes` Service the control plane keeps in `default`, for an API server serving on
/// `port`.
pub fn kubernetes_service(port: u16) -> Value {
    json!({
        "metadata": {
            "name": KUBERNETES_SERVICE,
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "clusterIP": KUBERNETES_SERVICE_IP.to_string(),
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": port}],
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(spec: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "default"}, "spec": spec})
    }

    #[test]
    fn a_new_service_gets_the_apis_defaults_and_the_lowest_free_cluster_ip() {
        let mut web = service(json!({"ports": [{"port": 80}]}));
        let used: BTreeSet<String> = ["10.0.0.1".to_owned(), "10.0.0.2".to_owned()].into();
        allocate(&mut web, &used).expect("allocated");
        let map = web.as_object_mut().expect("object");
        prepare(map);
        assert_eq!(web["spec"]["clusterIP"], "10.0.0.3");
        assert_eq!(web["spec"]["clusterIPs"], json!(["10.0.0.3"]));
        assert_eq!(web["spec"]["type"], "ClusterIP");
        assert_eq!(
            web["spec"]["ports"],
            json!([{"port": 80, "protocol": "TCP", "targetPort": 80}])
        );
        assert_eq!(web["spec"]["sessionAffinity"], "None");
    }

    #[test]
    fn an_asked_for_address_must_be_free_and_in_range_and_headless_stays_none() {
        let used: BTreeSet<String> = ["10.0.0.7".to_owned()].into();
        let mut taken = service(json!({"clusterIP": "10.0.0.7", "ports": [{"port": 80}]}));
        let error = allocate(&mut taken, &used).expect_err("taken");
        assert!(
            error.message.ends_with("provided IP is already allocated"),
            "{}",
            error.message
        );
        let mut outside = service(json!({"clusterIP": "192.168.0.1", "ports": [{"port": 80}]}));
        assert!(allocate(&mut outside, &used).is_err());
        let mut headless = service(json!({"clusterIP": "None"}));
        allocate(&mut headless, &used).expect("headless");
        assert_eq!(headless["spec"]["clusterIPs"], json!(["None"]));
        let mut errors = Vec::new();
        validate(&headless, &mut errors);
        assert!(errors.is_empty());
    }

    #[test]
    fn ports_are_required_in_range_and_named_when_several() {
        let mut errors = Vec::new();
        validate(&service(json!({})), &mut errors);
        validate(
            &service(json!({"ports": [{"port": 0, "name": "a"}, {"port": 81}]})),
            &mut errors,
        );
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            ["spec.ports", "spec.ports[0].port", "spec.ports[1].name"]
        );
    }

    #[test]
    fn an_update_keeps_the_allocated_address() {
        let old = service(json!({"clusterIP": "10.0.0.9", "clusterIPs": ["10.0.0.9"]}));
        let mut new = service(json!({"ports": [{"port": 80}]}));
        keep_allocated(&old, new.as_object_mut().expect("object"));
        assert_eq!(new["spec"]["clusterIP"], "10.0.0.9");
    }
}
