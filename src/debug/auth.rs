//! Fault injection's gate: enabled in the configuration, and a bearer token compared in
//! constant time. The token is never logged or echoed.

use http::{HeaderMap, header};

use super::error::DebugError;

#[derive(Clone)]
pub struct FaultInjectionGate {
    token: Option<String>,
}

impl FaultInjectionGate {
    /// `token` is `None` when fault injection is disabled.
    pub fn new(enabled: bool, token: Option<String>) -> Self {
        Self {
            token: token.filter(|_| enabled),
        }
    }

    /// 403 when fault injection is off; 401 when the bearer token is missing or wrong.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), DebugError> {
        let Some(expected) = &self.token else {
            return Err(DebugError::Forbidden(
                "fault injection is disabled; set debug.faultInjection.enabled and a token to use it".to_owned(),
            ));
        };
        let presented = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.strip_prefix("Bearer "))
            .ok_or_else(|| {
                DebugError::Unauthorized(
                    "an Authorization: Bearer <token> header is required".to_owned(),
                )
            })?;
        if constant_time_equal(presented.trim().as_bytes(), expected.as_bytes()) {
            Ok(())
        } else {
            Err(DebugError::Unauthorized(
                "the bearer token is not valid".to_owned(),
            ))
        }
    }
}

/// Compares without an early exit, so the time taken does not tell how much of a guess matched.
fn constant_time_equal(presented: &[u8], expected: &[u8]) -> bool {
    let mut difference = u8::from(presented.len() != expected.len());
    for (index, expected_byte) in expected.iter().enumerate() {
        let presented_byte = presented.get(index).copied().unwrap_or(0);
        difference |= presented_byte ^ expected_byte;
    }
    difference == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_equal;

    #[test]
    fn equal_only_when_every_byte_and_the_length_match() {
        assert!(constant_time_equal(b"secret-token", b"secret-token"));
        assert!(!constant_time_equal(b"secret-tokem", b"secret-token"));
        assert!(!constant_time_equal(b"secret", b"secret-token"));
        assert!(!constant_time_equal(
            b"secret-token-and-more",
            b"secret-token"
        ));
        assert!(!constant_time_equal(b"", b"x"));
    }
}
