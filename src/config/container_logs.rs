//! The container log rotation fields as the kubelet reads them: `containerLogMaxSize` is a
//! quantity that must be a whole number of bytes (apimachinery's `AsInt64`), and a negative one
//! turns rotation off. Validation (in `validate.rs`) and the node's wiring both read it here.

use nodepulse_actors::quantity::parse_quantity;

use super::Config;

/// `containerLogMaxSize` in bytes: `Ok(None)` when negative (rotation off), the reason when
/// it is no quantity or not a whole number of bytes.
pub fn parse_max_size(text: &str) -> Result<Option<u64>, String> {
    let value = parse_quantity(text).map_err(|error| error.reason.to_owned())?;
    if value.fract() != 0.0 || value.abs() >= 9.2e18 {
        return Err("invalid max log size: not a whole number of bytes".to_owned());
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
        assert!(parse_max_size("1.5").is_err_and(|reason| reason.contains("whole")));
        assert!(parse_max_size("10MB").is_err_and(|reason| reason.contains("suffix")));
        assert!(parse_max_size("").is_err_and(|reason| reason.contains("number")));
    }
}
