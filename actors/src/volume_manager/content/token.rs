//! The kubelet's token manager (§1.11): a TokenRequest's token is reused until it requires
//! refresh — past 80 % of its lifetime or 24 h after it was issued, minus a jitter under 10 s —
//! and dropped with its pod. Pure: the actor asks the API and passes `now`.

use std::{collections::BTreeMap, time::Duration};

use jiff::{SignedDuration, Timestamp};

use super::TokenSpec;
use crate::shrink::btree_map_after_removal;

/// A token is refreshed at the latest this long after it was issued.
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(24 * 3600);
/// The jitter bound the kubelet subtracts from both deadlines.
pub const MAX_JITTER: Duration = Duration::from_secs(10);

/// A token the API server issued.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssuedToken {
    pub token: String,
    pub issued_at: Timestamp,
    pub expires_at: Timestamp,
}

impl IssuedToken {
    /// Whether the kubelet would ask for a new one at `now` (`jitter` < 10 s).
    pub fn requires_refresh(&self, now: Timestamp, jitter: Duration) -> bool {
        let jitter = SignedDuration::try_from(jitter).unwrap_or_default();
        let lifetime = self.expires_at.duration_since(self.issued_at);
        let by_age = self
            .issued_at
            .saturating_add(SignedDuration::try_from(MAX_TOKEN_AGE).unwrap_or_default())
            .map(|t| t.saturating_sub(jitter).unwrap_or(t));
        let by_lifetime = self
            .expires_at
            .saturating_sub(lifetime / 5)
            .map(|t| t.saturating_sub(jitter).unwrap_or(t));
        by_age.is_ok_and(|at| now > at) || by_lifetime.is_ok_and(|at| now > at)
    }

    /// When it requires refresh at the latest (with no jitter).
    pub fn refresh_at(&self) -> Timestamp {
        let lifetime = self.expires_at.duration_since(self.issued_at);
        let by_lifetime = self
            .expires_at
            .saturating_sub(lifetime / 5)
            .unwrap_or(self.expires_at);
        let by_age = self
            .issued_at
            .saturating_add(SignedDuration::try_from(MAX_TOKEN_AGE).unwrap_or_default())
            .unwrap_or(by_lifetime);
        by_lifetime.min(by_age)
    }
}

/// The tokens issued so far, by what was asked.
#[derive(Debug, Clone, Default)]
pub struct TokenCache {
    tokens: BTreeMap<TokenSpec, IssuedToken>,
}

impl TokenCache {
    /// The cached token for `spec` unless it requires refresh.
    pub fn fresh(
        &self,
        spec: &TokenSpec,
        now: Timestamp,
        jitter: Duration,
    ) -> Option<&IssuedToken> {
        self.tokens
            .get(spec)
            .filter(|token| !token.requires_refresh(now, jitter))
    }

    /// The cached token even if due for refresh, while it has not expired: a failed refresh
    /// keeps serving it, as the kubelet does.
    pub fn unexpired(&self, spec: &TokenSpec, now: Timestamp) -> Option<&IssuedToken> {
        self.tokens.get(spec).filter(|token| token.expires_at > now)
    }

    pub fn insert(&mut self, spec: TokenSpec, token: IssuedToken) {
        self.tokens.insert(spec, token);
    }

    /// Forgets the tokens of every pod not in `live` pod UIDs.
    pub fn retain_pods(&mut self, live: impl Fn(&str) -> bool) {
        self.tokens.retain(|spec, _| live(&spec.pod_uid));
        btree_map_after_removal(&mut self.tokens);
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&TokenSpec, &IssuedToken)> {
        self.tokens.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(lifetime_s: i64) -> IssuedToken {
        let issued_at: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        IssuedToken {
            token: "t".into(),
            issued_at,
            expires_at: issued_at + SignedDuration::from_secs(lifetime_s),
        }
    }

    #[test]
    fn a_token_is_refreshed_past_eighty_percent_of_its_lifetime() {
        let t = token(3600);
        let at = |s: i64| t.issued_at + SignedDuration::from_secs(s);
        assert!(!t.requires_refresh(at(2879), Duration::ZERO));
        assert!(t.requires_refresh(at(2881), Duration::ZERO));
        assert!(
            t.requires_refresh(at(2875), Duration::from_secs(9)),
            "jitter comes earlier"
        );
        assert_eq!(t.refresh_at(), at(2880));
    }

    #[test]
    fn a_long_lived_token_is_refreshed_after_a_day() {
        let t = token(7 * 24 * 3600);
        let at = |s: i64| t.issued_at + SignedDuration::from_secs(s);
        assert!(!t.requires_refresh(at(24 * 3600 - 1), Duration::ZERO));
        assert!(t.requires_refresh(at(24 * 3600 + 1), Duration::ZERO));
        assert_eq!(t.refresh_at(), at(24 * 3600));
    }
}
