//! Kubernetes resource quantities (`100Mi`, `1.5Gi`, `500m`, `2k`, `1e3`) as plain numbers,
//! for reservations and eviction thresholds. Parsing follows apimachinery's suffixes: binary
//! (`Ki`…`Ei`), decimal (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) and exponents (`e3`).

/// Why a quantity was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid quantity {text:?}: {reason}")]
pub struct QuantityError {
    pub text: String,
    pub reason: &'static str,
}

/// Parses a quantity into its value (e.g. bytes for memory, cores for cpu).
pub fn parse_quantity(text: &str) -> Result<f64, QuantityError> {
    let error = |reason| QuantityError {
        text: text.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    let number_end = trimmed
        .find(|character: char| {
            !(character.is_ascii_digit() || matches!(character, '.' | '+' | '-'))
        })
        .unwrap_or(trimmed.len());
    let (number, suffix) = trimmed.split_at(number_end);
    if number.is_empty() {
        return Err(error("expected a number, such as 100Mi"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| error("expected a number, such as 100Mi"))?;
    let multiplier = match suffix {
        "" => 1.0,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        exponent if exponent.starts_with(['e', 'E']) => {
            let power: i32 = exponent[1..].parse().map_err(|_| error("unknown suffix"))?;
            10f64.powi(power)
        }
        _ => {
            return Err(error(
                "unknown suffix; use Ki, Mi, Gi, Ti, Pi, Ei, n, u, m, k, M, G, T, P, E or an exponent",
            ));
        }
    };
    let parsed = value * multiplier;
    if parsed.is_finite() {
        Ok(parsed)
    } else {
        Err(error("too large"))
    }
}

/// Formats a byte count as the API server would a BinarySI quantity: the largest binary suffix
/// that divides it exactly (`16393248Ki`, `100Mi`), plain bytes otherwise.
pub fn format_binary(bytes: u64) -> String {
    const SUFFIXES: [(&str, u64); 6] = [
        ("Ei", 1 << 60),
        ("Pi", 1 << 50),
        ("Ti", 1 << 40),
        ("Gi", 1 << 30),
        ("Mi", 1 << 20),
        ("Ki", 1 << 10),
    ];
    if bytes == 0 {
        return "0".to_owned();
    }
    for (suffix, unit) in SUFFIXES {
        if bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    bytes.to_string()
}

/// Formats cores as a DecimalSI cpu quantity: `2`, or millicores `1500m` when fractional.
pub fn format_cpu(millicores: u64) -> String {
    if millicores.is_multiple_of(1000) {
        (millicores / 1000).to_string()
    } else {
        format!("{millicores}m")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_the_api_server() {
        assert_eq!(format_binary(16_786_685_952), "16393248Ki");
        assert_eq!(format_binary(104_857_600), "100Mi");
        assert_eq!(format_binary(1_073_741_824), "1Gi");
        assert_eq!(format_binary(1000), "1000");
        assert_eq!(format_cpu(2000), "2");
        assert_eq!(format_cpu(1500), "1500m");
    }

    #[test]
    fn parses_binary_decimal_and_exponent_suffixes() {
        let cases = [
            ("100Mi", 104_857_600.0),
            ("1Gi", 1_073_741_824.0),
            ("500m", 0.5),
            ("2k", 2000.0),
            ("1e3", 1000.0),
            ("1.5Ki", 1536.0),
            ("110", 110.0),
        ];
        for (text, expected) in cases {
            assert_eq!(parse_quantity(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn refuses_garbage_with_the_reason() {
        assert!(parse_quantity("lots").is_err());
        assert!(parse_quantity("10Xi").is_err());
        assert!(parse_quantity("").is_err());
    }
}
