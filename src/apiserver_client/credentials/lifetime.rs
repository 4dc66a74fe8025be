//! A certificate's validity and the certificate manager's rotation deadline
//! (`client-go/util/certificate`): `NotBefore + lifetime × (0.7 + 0.2·u)` for a fresh uniform
//! `u` in [0, 1), so rotation starts between 70 and 90 % of the lifetime. Pure functions.

use std::time::{Duration, SystemTime};

/// When a certificate starts and stops being valid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Validity {
    pub not_before: SystemTime,
    pub not_after: SystemTime,
}

impl Validity {
    /// The validity of a DER certificate, if it parses.
    pub fn of(certificate: &[u8]) -> Option<Self> {
        let (_, parsed) = x509_parser::parse_x509_certificate(certificate).ok()?;
        let at = |time: x509_parser::time::ASN1Time| {
            let seconds = u64::try_from(time.timestamp()).ok()?;
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
        };
        Some(Validity {
            not_before: at(parsed.validity().not_before)?,
            not_after: at(parsed.validity().not_after)?,
        })
    }

    /// The whole lifetime.
    pub fn lifetime(&self) -> Duration {
        self.not_after
            .duration_since(self.not_before)
            .unwrap_or_default()
    }

    /// Whether `now` is past `NotAfter` (the manager's `Current()` then has no certificate).
    pub fn expired_at(&self, now: SystemTime) -> bool {
        now > self.not_after
    }
}

/// `nextRotationDeadline` for `validity`, with `uniform` in [0, 1) as the jitter's draw.
pub fn rotation_deadline(validity: &Validity, uniform: f64) -> SystemTime {
    let fraction = 0.7 + 0.2 * uniform.clamp(0.0, 1.0);
    validity.not_before + validity.lifetime().mul_f64(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn year_from(start: SystemTime) -> Validity {
        Validity {
            not_before: start,
            not_after: start + Duration::from_secs(365 * 24 * 3600),
        }
    }

    #[test]
    fn the_deadline_falls_between_70_and_90_percent_of_the_lifetime() {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let validity = year_from(start);
        let lifetime = validity.lifetime();
        // Within a millisecond of the fraction (floating point).
        let at = |fraction: f64| start + lifetime.mul_f64(fraction);
        let near = |a: SystemTime, b: SystemTime| {
            a.duration_since(b)
                .or_else(|_| b.duration_since(a))
                .unwrap_or_default()
                < Duration::from_millis(1)
        };
        assert!(near(rotation_deadline(&validity, 0.0), at(0.7)));
        assert!(near(rotation_deadline(&validity, 0.5), at(0.8)));
        let latest = rotation_deadline(&validity, 0.999_999);
        assert!(latest < at(0.9));
        assert!(latest > at(0.899));
    }

    #[test]
    fn a_short_backdated_certificate_rotates_after_its_issue() {
        // The signer's 5-minute backdate is part of the lifetime: a 150 s certificate issued
        // now lives 450 s and rotates 15..105 s from now.
        let issued = SystemTime::UNIX_EPOCH + Duration::from_secs(2_000_000);
        let validity = Validity {
            not_before: issued - Duration::from_secs(300),
            not_after: issued + Duration::from_secs(150),
        };
        assert_eq!(
            rotation_deadline(&validity, 0.0),
            issued + Duration::from_secs(15)
        );
        assert_eq!(
            rotation_deadline(&validity, 1.0),
            issued + Duration::from_secs(105)
        );
        assert!(!validity.expired_at(issued + Duration::from_secs(150)));
        assert!(validity.expired_at(issued + Duration::from_secs(151)));
    }
}
