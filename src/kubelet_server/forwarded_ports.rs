//! The ports a `/portForward` request names, read as the kubelet's `NewV4Options` reads them:
//! only a WebSocket request carries them (`?port=80,443`, repeatable; a SPDY client names
//! each port on its streams instead), each a decimal 1–65535 as Go's `ParseUint(p, 10, 16)`
//! takes it (no sign, no blanks), and the kubelet's 400 texts for what is not one.

use http::{HeaderMap, header};

/// Why a request's ports are refused; the text is the kubelet's 400 body.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortsError {
    #[error("query parameter \"port\" is required")]
    Missing,
    #[error("query parameter \"port\" cannot be empty")]
    Empty,
    #[error("unable to parse {value:?} as a port: {source}")]
    Unparsable {
        value: String,
        #[source]
        source: ParseUintError,
    },
    #[error("port {0:?} must be > 0")]
    Zero(String),
}

/// Go's `strconv.ParseUint` errors, with its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseUintError {
    #[error("strconv.ParseUint: parsing {0:?}: invalid syntax")]
    Syntax(String),
    #[error("strconv.ParseUint: parsing {0:?}: value out of range")]
    Range(String),
}

/// The ports of a request with `headers` and the decoded `query` pairs, or why the kubelet
/// answers 400.
pub fn forwarded_ports(
    headers: &HeaderMap,
    query: &[(String, String)],
) -> Result<Vec<i32>, PortsError> {
    if !is_websocket(headers) {
        return Ok(Vec::new());
    }
    let values: Vec<&str> = query
        .iter()
        .filter(|(key, _)| key == "port")
        .map(|(_, value)| value.as_str())
        .collect();
    if values.is_empty() {
        return Err(PortsError::Missing);
    }
    let mut ports = Vec::new();
    for value in values {
        if value.is_empty() {
            return Err(PortsError::Empty);
        }
        for piece in value.split(',') {
            let port = parse_port(piece).map_err(|source| PortsError::Unparsable {
                value: value.to_owned(),
                source,
            })?;
            if port == 0 {
                return Err(PortsError::Zero(value.to_owned()));
            }
            ports.push(i32::from(port));
        }
    }
    Ok(ports)
}

/// Go's `strconv.ParseUint(text, 10, 16)`, with its error text: a syntax error for anything
/// but digits, a range error as soon as the digits so far pass 65535.
fn parse_port(text: &str) -> Result<u16, ParseUintError> {
    let syntax = || ParseUintError::Syntax(text.to_owned());
    if text.is_empty() {
        return Err(syntax());
    }
    let mut port: u32 = 0;
    for byte in text.bytes() {
        if !byte.is_ascii_digit() {
            return Err(syntax());
        }
        port = port * 10 + u32::from(byte - b'0');
        if port > u32::from(u16::MAX) {
            return Err(ParseUintError::Range(text.to_owned()));
        }
    }
    u16::try_from(port).map_err(|_| syntax())
}

/// `wsstream.IsWebSocketRequest`: an upgrade (`Connection: upgrade`) to `websocket`.
fn is_websocket(headers: &HeaderMap) -> bool {
    let upgrade = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|token| token.trim().eq_ignore_ascii_case("upgrade"));
    upgrade
        && headers
            .get(header::UPGRADE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.eq_ignore_ascii_case("websocket"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn websocket() -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::CONNECTION, "Upgrade".parse().expect("value"));
        headers.insert(header::UPGRADE, "websocket".parse().expect("value"));
        headers
    }

    fn ports(query: &str) -> Result<Vec<i32>, String> {
        let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).expect("decodes");
        forwarded_ports(&websocket(), &pairs).map_err(|error| error.to_string())
    }

    #[test]
    fn ports_are_read_as_the_kubelet_reads_them_at_every_boundary() {
        assert_eq!(ports("port=1&port=80,65535"), Ok(vec![1, 80, 65535]));
        assert_eq!(ports("port=0080"), Ok(vec![80]));
        let cases = [
            ("", "query parameter \"port\" is required"),
            ("port=", "query parameter \"port\" cannot be empty"),
            ("port=0", "port \"0\" must be > 0"),
            ("port=80,0", "port \"80,0\" must be > 0"),
            (
                "port=65536",
                "unable to parse \"65536\" as a port: strconv.ParseUint: parsing \"65536\": value out of range",
            ),
            (
                "port=18446744073709551616",
                "unable to parse \"18446744073709551616\" as a port: strconv.ParseUint: parsing \"18446744073709551616\": value out of range",
            ),
            (
                "port=-1",
                "unable to parse \"-1\" as a port: strconv.ParseUint: parsing \"-1\": invalid syntax",
            ),
            (
                "port=%2B80",
                "unable to parse \"+80\" as a port: strconv.ParseUint: parsing \"+80\": invalid syntax",
            ),
            (
                "port=80,",
                "unable to parse \"80,\" as a port: strconv.ParseUint: parsing \"\": invalid syntax",
            ),
            (
                "port=%2080",
                "unable to parse \" 80\" as a port: strconv.ParseUint: parsing \" 80\": invalid syntax",
            ),
        ];
        for (query, message) in cases {
            assert_eq!(ports(query), Err(message.to_owned()), "{query}");
        }
    }

    #[test]
    fn a_spdy_request_names_its_ports_on_its_streams_not_in_the_query() {
        let mut spdy = HeaderMap::new();
        spdy.insert(header::CONNECTION, "Upgrade".parse().expect("value"));
        spdy.insert(header::UPGRADE, "SPDY/3.1".parse().expect("value"));
        let pairs = vec![("port".to_owned(), "nonsense".to_owned())];
        assert_eq!(forwarded_ports(&spdy, &pairs), Ok(Vec::new()));
        assert_eq!(forwarded_ports(&HeaderMap::new(), &[]), Ok(Vec::new()));
    }
}
