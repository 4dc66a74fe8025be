//! The kubelet's Summary API types (`stats/v1alpha1`), with its JSON names: what one scrape
//! collects and both `/stats/summary` and `/metrics/resource` render. Times keep the runtime's
//! and the host's precision inside (metrics-server rates by millisecond timestamps) and are
//! written as `metav1.Time` is, RFC 3339 to the second in UTC. An unknown figure is `None` and
//! left out, as the kubelet's pointer fields are.

use jiff::Timestamp;
use serde::{Serialize, Serializer};

/// `metav1.Time`: truncated to the second.
fn seconds<S: Serializer>(time: &Timestamp, serializer: S) -> Result<S::Ok, S::Error> {
    let truncated = Timestamp::from_second(time.as_second()).unwrap_or(*time);
    serializer.collect_str(&truncated)
}

/// A Go `float64` as `encoding/json` writes it: a whole number without a fraction (`0`, not
/// `0.0`), anything else in its shortest form.
fn go_float<S: Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every whole number below is exact
    if value.is_finite() && value.fract() == 0.0 && value.abs() < EXACT {
        serializer.serialize_i64(*value as i64)
    } else {
        serializer.serialize_f64(*value)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub node: NodeStats,
    pub pods: Vec<PodStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeStats {
    pub node_name: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system_containers: Vec<ContainerStats>,
    #[serde(serialize_with = "seconds")]
    pub start_time: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rlimit: Option<RlimitStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image_fs: Option<FsStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RlimitStats {
    #[serde(serialize_with = "seconds")]
    pub time: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub maxpid: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curproc: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PodReference {
    pub name: String,
    pub namespace: String,
    pub uid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodStats {
    pub pod_ref: PodReference,
    #[serde(serialize_with = "seconds")]
    pub start_time: Timestamp,
    pub containers: Vec<ContainerStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkStats>,
    #[serde(rename = "volume", skip_serializing_if = "Vec::is_empty")]
    pub volume_stats: Vec<VolumeStats>,
    #[serde(rename = "ephemeral-storage", skip_serializing_if = "Option::is_none")]
    pub ephemeral_storage: Option<FsStats>,
    #[serde(rename = "process_stats", skip_serializing_if = "Option::is_none")]
    pub process_stats: Option<ProcessStats>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProcessStats {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub process_count: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerStats {
    pub name: String,
    #[serde(serialize_with = "seconds")]
    pub start_time: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<IoStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rootfs: Option<FsStats>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub logs: Option<FsStats>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CpuStats {
    #[serde(serialize_with = "seconds")]
    pub time: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_nano_cores: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_core_nano_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// `IOStats`: only its pressure.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IoStats {
    #[serde(serialize_with = "seconds")]
    pub time: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

/// `PSIStats`: the stall of all (`full`) and of some (`some`) tasks.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PsiStats {
    pub full: PsiData,
    pub some: PsiData,
}

/// `PSIData`: `total` as cAdvisor passes the kernel's (microseconds), the averages percent.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PsiData {
    pub total: u64,
    #[serde(serialize_with = "go_float")]
    pub avg10: f64,
    #[serde(serialize_with = "go_float")]
    pub avg60: f64,
    #[serde(serialize_with = "go_float")]
    pub avg300: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MemoryStats {
    #[serde(serialize_with = "seconds")]
    pub time: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub working_set_bytes: Option<u64>,
    #[serde(rename = "rssBytes", skip_serializing_if = "Option::is_none")]
    pub rss_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub major_page_faults: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub psi: Option<PsiStats>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceStats {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx_errors: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx_errors: Option<u64>,
}

/// The default interface (`eth0`) inline, every interface in `interfaces`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetworkStats {
    #[serde(serialize_with = "seconds")]
    pub time: Timestamp,
    #[serde(flatten)]
    pub default: InterfaceStats,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<InterfaceStats>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FsStats {
    #[serde(serialize_with = "seconds")]
    pub time: Timestamp,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub available_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_free: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inodes_used: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PvcReference {
    pub name: String,
    pub namespace: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeStats {
    #[serde(flatten)]
    pub fs: FsStats,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pvc_ref: Option<PvcReference>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_to_the_second_and_unknown_figures_left_out() {
        let time: Timestamp = "2026-12-01T10:00:05.987654321Z".parse().expect("time");
        let cpu = CpuStats {
            time,
            usage_nano_cores: None,
            usage_core_nano_seconds: Some(42),
            psi: None,
        };
        assert_eq!(
            serde_json::to_value(&cpu).expect("json"),
            serde_json::json!({"time": "2026-12-01T10:00:05Z", "usageCoreNanoSeconds": 42})
        );
        let network = NetworkStats {
            time,
            default: InterfaceStats {
                name: "eth0".into(),
                rx_bytes: Some(1),
                rx_errors: None,
                tx_bytes: None,
                tx_errors: None,
            },
            interfaces: Vec::new(),
        };
        assert_eq!(
            serde_json::to_value(&network).expect("json"),
            serde_json::json!({"time": "2026-12-01T10:00:05Z", "name": "eth0", "rxBytes": 1})
        );
    }

    #[test]
    fn pressure_averages_are_written_as_go_writes_a_float64() {
        let data = PsiData {
            total: 793_937_047,
            avg10: 0.18,
            avg60: 0.0,
            avg300: 12.0,
        };
        let io = IoStats {
            time: "2026-12-01T10:00:05Z".parse().expect("time"),
            psi: Some(PsiStats {
                full: data,
                some: data,
            }),
        };
        let text = serde_json::to_string(&io).expect("json");
        assert!(
            text.contains(r#""total":793937047,"avg10":0.18,"avg60":0,"avg300":12}"#),
            "{text}"
        );
        assert!(text.starts_with(r#"{"time":"2026-12-01T10:00:05Z","psi":{"full":"#));
    }
}
