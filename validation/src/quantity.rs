//! Kubernetes resource quantities (`100Mi`, `1.5Gi`, `500m`, `2k`, `1e3`) as plain numbers,
//! for reservations and eviction thresholds. Parsing follows apimachinery's suffixes: binary
//! (`Ki`…`Ei`), decimal (`n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`) and exponents (`e3`).
//! [`value`] and [`milli_value`] are exact integers rounded up, as apimachinery's `Value()` and
//! `MilliValue()`, for the scheduler's arithmetic (a float makes `0.1` cpu 101 millicores).

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

/// `Quantity.Value()`: the quantity in whole units, rounded up (`1.5` → 2, `100m` → 1).
pub fn value(text: &str) -> Result<i64, QuantityError> {
    scaled(text, 0)
}

/// `Quantity.MilliValue()`: the quantity in thousandths, rounded up (`0.1` → 100, `1u` → 1).
pub fn milli_value(text: &str) -> Result<i64, QuantityError> {
    scaled(text, 3)
}

/// The quantity × 10^`scale`, rounded up, computed on integers: mantissa digits, a power of
/// ten and a power of 1024, so no decimal fraction is ever approximated.
fn scaled(text: &str, scale: i32) -> Result<i64, QuantityError> {
    let error = |reason| QuantityError {
        text: text.to_owned(),
        reason,
    };
    let trimmed = text.trim();
    let (negative, unsigned) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let number_end = unsigned
        .find(|character: char| !(character.is_ascii_digit() || character == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return Err(error("expected a number, such as 100Mi"));
    }
    let (binary_power, mut decimal_power): (u32, i32) = match suffix {
        "" => (0, 0),
        "Ki" => (1, 0),
        "Mi" => (2, 0),
        "Gi" => (3, 0),
        "Ti" => (4, 0),
        "Pi" => (5, 0),
        "Ei" => (6, 0),
        "n" => (0, -9),
        "u" => (0, -6),
        "m" => (0, -3),
        "k" => (0, 3),
        "M" => (0, 6),
        "G" => (0, 9),
        "T" => (0, 12),
        "P" => (0, 15),
        "E" => (0, 18),
        exponent if exponent.starts_with(['e', 'E']) => (
            0,
            exponent[1..].parse().map_err(|_| error("unknown suffix"))?,
        ),
        _ => return Err(error("unknown suffix")),
    };
    let too_large = || error("too large");
    let mut mantissa: i128 = 0;
    for digit in whole.bytes().chain(fraction.bytes()) {
        mantissa = mantissa
            .checked_mul(10)
            .and_then(|m| m.checked_add(i128::from(digit - b'0')))
            .ok_or_else(too_large)?;
    }
    decimal_power += scale - i32::try_from(fraction.len()).map_err(|_| too_large())?;
    mantissa = mantissa
        .checked_mul(1i128 << (10 * binary_power))
        .ok_or_else(too_large)?;
    if decimal_power >= 0 {
        let factor = 10i128
            .checked_pow(decimal_power.unsigned_abs())
            .ok_or_else(too_large)?;
        mantissa = mantissa.checked_mul(factor).ok_or_else(too_large)?;
    } else {
        // Beyond 10^38 every i128 mantissa rounds up to 1 (or stays 0).
        let divisor = 10i128
            .checked_pow(decimal_power.unsigned_abs())
            .unwrap_or(i128::MAX);
        mantissa = mantissa / divisor + i128::from(mantissa % divisor != 0);
    }
    let magnitude = i64::try_from(mantissa).map_err(|_| too_large())?;
    Ok(if negative { -magnitude } else { magnitude })
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
    fn exact_values_round_up_as_apimachinery() {
        let cases = [
            ("0.1", 100, 1),
            ("100m", 100, 1),
            ("1500m", 1500, 2),
            ("2", 2000, 2),
            ("1u", 1, 1),
            ("1Gi", 1_073_741_824_000, 1_073_741_824),
            ("1.5Ki", 1_536_000, 1536),
            ("1e3", 1_000_000, 1000),
            ("128974848", 128_974_848_000, 128_974_848),
            ("129e6", 129_000_000_000, 129_000_000),
            ("123Mi", 128_974_848_000, 128_974_848),
            ("0", 0, 0),
            (".5", 500, 1),
        ];
        for (text, milli, whole) in cases {
            assert_eq!(milli_value(text), Ok(milli), "milli {text}");
            assert_eq!(value(text), Ok(whole), "value {text}");
        }
        assert!(value("1.2.3").is_err());
        assert!(value("10Xi").is_err());
        assert!(value("").is_err());
        assert!(value("99999999999E").is_err());
    }

    #[test]
    fn refuses_garbage_with_the_reason() {
        assert!(parse_quantity("lots").is_err());
        assert!(parse_quantity("10Xi").is_err());
        assert!(parse_quantity("").is_err());
    }
}
