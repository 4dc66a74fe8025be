//! The kubelet plugin registration API (`pluginregistration.Registration`, kubelet
//! `pkg/apis/pluginregistration/v1/api.proto`), hand-written with prost's derives: what the
//! plugin watcher asks a socket in `plugins_registry` and what it tells it back.

/// `InfoRequest {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct InfoRequest {}

/// `PluginInfo`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PluginInfo {
    /// `CSIPlugin`, `DevicePlugin` or `DRAPlugin`.
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(string, tag = "2")]
    pub name: String,
    /// The driver's own socket; empty means the registration socket itself.
    #[prost(string, tag = "3")]
    pub endpoint: String,
    #[prost(string, repeated, tag = "4")]
    pub supported_versions: Vec<String>,
}

/// `RegistrationStatus`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegistrationStatus {
    #[prost(bool, tag = "1")]
    pub plugin_registered: bool,
    #[prost(string, tag = "2")]
    pub error: String,
}

/// `RegistrationStatusResponse {}`
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegistrationStatusResponse {}

/// The gRPC paths of the two calls.
pub mod paths {
    pub const GET_INFO: &str = "/pluginregistration.Registration/GetInfo";
    pub const NOTIFY_REGISTRATION_STATUS: &str =
        "/pluginregistration.Registration/NotifyRegistrationStatus";
}

/// The plugin type the CSI handler serves.
pub const CSI_PLUGIN_TYPE: &str = "CSIPlugin";

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn plugin_info_decodes_by_the_registration_field_numbers() {
        let bytes = [
            &[0x0a, 9][..],
            b"CSIPlugin",
            &[0x12, 1],
            b"d",
            &[0x1a, 2],
            b"/s",
            &[0x22, 5],
            b"1.0.0",
        ]
        .concat();
        let info = PluginInfo::decode(bytes.as_slice()).expect("decodes");
        assert_eq!(info.r#type, "CSIPlugin");
        assert_eq!(info.name, "d");
        assert_eq!(info.endpoint, "/s");
        assert_eq!(info.supported_versions, ["1.0.0"]);
        let status = RegistrationStatus {
            plugin_registered: true,
            error: "e".to_owned(),
        };
        assert_eq!(status.encode_to_vec(), [0x08, 1, 0x12, 1, b'e']);
    }
}
