//! The container log rotation fields as the kubelet reads them: `containerLogMaxSize` is a
//! quantity that must be a whole number of bytes (apimachinery's `AsInt64`), and a negative one
//! turns rotation off. Validation (in `validate.rs`) and the node's wiring both read it here.

use nodepulse_actors::quantity::{QuantityError, parse_quantity};

use super::Config;

/// Why `containerLogMaxSize` is refused; the text is the reason shown after the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MaxSizeError {
    /// No quantity; only the reason is shown, as the setting's value is quoted beside it.
    #[error("{}", .0.reason)]
    Quantity(#[source] QuantityError),
    #[error("invalid max log size: not a whole number of bytes")]
    NotWholeBytes,
}

/// `containerLogMaxSize` in bytes: `Ok(None)` when negative (rotation off), why not when it
/// is no quantity or not a whole number of bytes.
pub fn parse_max_size(text: &str) -> Result<Option<u64>, MaxSizeError> {
    let value = parse_quantity(text).map_err(MaxSizeError::Quantity)?;
    if value.fract() != 0.0 || value.abs() >= 9.2e18 {
        return Err(MaxSizeError::NotWholeBytes);
    }
    if value < 0.0 {
        return Ok(None);
    }
    // Whole and in range: the conversion is exact.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(Some(value as u64))
}

impl Config {
    /// The size at which a container's log is rotated; `None`: never (negative, or refused at
    /// load time, which a loaded configuration never is).
    pub fn container_log_max_bytes(&self) -> Option<u64> {
        parse_max_size(&self.container_log_max_size).ok().flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_max_size_is_whole_bytes_and_negative_turns_rotation_off() {
        assert_eq!(parse_max_size("10Mi"), Ok(Some(10 << 20)));
        assert_eq!(parse_max_size("2k"), Ok(Some(2000)));
        assert_eq!(parse_max_size("0"), Ok(Some(0)));
        assert_eq!(parse_max_size("-1"), Ok(None));
        let reason = |text| parse_max_size(text).unwrap_err().to_string();
        assert!(reason("1.5").contains("whole"));
        assert!(reason("10MB").contains("suffix"));
        assert!(reason("").contains("number"));
    }
}
