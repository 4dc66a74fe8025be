//! CRI v1 streaming calls: `Exec`, `Attach` and `PortForward` answer with a one-shot URL on the
//! runtime's streaming server, to which the kubelet API relays the client's upgraded
//! connection. Field numbers are kubernetes/cri-api `pkg/apis/runtime/v1/api.proto`'s.

/// `ExecRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExecRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(string, repeated, tag = "2")]
    pub cmd: Vec<String>,
    #[prost(bool, tag = "3")]
    pub tty: bool,
    #[prost(bool, tag = "4")]
    pub stdin: bool,
    #[prost(bool, tag = "5")]
    pub stdout: bool,
    #[prost(bool, tag = "6")]
    pub stderr: bool,
}

/// `AttachRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct AttachRequest {
    #[prost(string, tag = "1")]
    pub container_id: String,
    #[prost(bool, tag = "2")]
    pub stdin: bool,
    #[prost(bool, tag = "3")]
    pub tty: bool,
    #[prost(bool, tag = "4")]
    pub stdout: bool,
    #[prost(bool, tag = "5")]
    pub stderr: bool,
}

/// `PortForwardRequest`
#[derive(Clone, PartialEq, prost::Message)]
pub struct PortForwardRequest {
    #[prost(string, tag = "1")]
    pub pod_sandbox_id: String,
    #[prost(int32, repeated, tag = "2")]
    pub port: Vec<i32>,
}

/// `ExecResponse`, `AttachResponse` and `PortForwardResponse`: `{ string url = 1; }`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StreamingUrl {
    #[prost(string, tag = "1")]
    pub url: String,
}

pub const EXEC: &str = "/runtime.v1.RuntimeService/Exec";
pub const ATTACH: &str = "/runtime.v1.RuntimeService/Attach";
pub const PORT_FORWARD: &str = "/runtime.v1.RuntimeService/PortForward";

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;

    #[test]
    fn the_requests_use_the_cri_field_numbers() {
        let exec = ExecRequest {
            container_id: "c".into(),
            cmd: vec!["sh".into()],
            tty: true,
            stdin: true,
            stdout: true,
            stderr: true,
        };
        // (1, "c"), (2, "sh"), then bools 3..=6.
        assert_eq!(
            exec.encode_to_vec(),
            [
                0x0a, 1, b'c', 0x12, 2, b's', b'h', 0x18, 1, 0x20, 1, 0x28, 1, 0x30, 1
            ]
        );
        let attach = AttachRequest {
            container_id: "c".into(),
            stdin: true,
            tty: true,
            stdout: true,
            stderr: true,
        };
        assert_eq!(
            attach.encode_to_vec(),
            [0x0a, 1, b'c', 0x10, 1, 0x18, 1, 0x20, 1, 0x28, 1]
        );
        let forward = PortForwardRequest {
            pod_sandbox_id: "s".into(),
            port: vec![80],
        };
        assert_eq!(forward.encode_to_vec(), [0x0a, 1, b's', 0x12, 1, 80]);
    }
}
