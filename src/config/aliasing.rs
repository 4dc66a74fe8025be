//! A YAML document's size with its aliases expanded, counted before it is decoded: the YAML
//! parser replays an anchor at each alias, so one anchor of many nodes referenced many times
//! grows with the square of the input. go-yaml refuses "excessive aliasing" (the fix of
//! CVE-2019-11253); this is nodepulse's equivalent for static pod manifests and its config file.

use serde::de::{DeserializeSeed, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

/// The nodes aliases may add. go-yaml allows up to about 400 000 alias-driven decodes, which
/// it puts at ~100 MB; nodepulse runs in 8 MiB and builds a JSON tree of every node, so it
/// allows a quarter of that, still far past what any real manifest or configuration shares.
pub const ALIAS_NODES: u64 = 100_000;
/// The scalar bytes aliases may add (go-yaml shares a string between its aliases, nodepulse
/// copies it at each).
pub const ALIAS_BYTES: u64 = 1 << 20;

/// The document, expanded, is larger than its own text allows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "document contains excessive aliasing: expanded, it passes {limit} {what} ({input} bytes written)"
)]
pub struct ExcessiveAliasing {
    pub what: &'static str,
    pub limit: u64,
    pub input: usize,
}

/// Whether the one YAML document in `data` stays within what its length allows once its
/// aliases are expanded: `2 × len + ALIAS_NODES` nodes (every scalar, sequence, mapping and
/// key) and `2 × len + ALIAS_BYTES` scalar bytes. No document without aliases comes near
/// (a node takes at least two thirds of a byte to write, an escape at most doubles its text),
/// so only aliasing is refused. The walk stops at the limit, holding nothing but the parser's
/// events, so a refused bomb costs what its text does. A document that does not parse passes:
/// the decoding that follows says why in its own words.
pub fn check_aliasing(data: &[u8]) -> Result<(), ExcessiveAliasing> {
    let literal = (data.len() as u64).saturating_mul(2);
    let mut tally = Tally {
        nodes_left: literal.saturating_add(ALIAS_NODES),
        bytes_left: literal.saturating_add(ALIAS_BYTES),
        exceeded: None,
    };
    let deserializer = serde_yaml_ng::Deserializer::from_slice(data);
    let _ = (&mut tally).deserialize(deserializer);
    match tally.exceeded {
        None => Ok(()),
        Some(what) => Err(ExcessiveAliasing {
            what,
            limit: match what {
                NODES => literal.saturating_add(ALIAS_NODES),
                _ => literal.saturating_add(ALIAS_BYTES),
            },
            input: data.len(),
        }),
    }
}

const NODES: &str = "nodes";
const BYTES: &str = "scalar bytes";

/// What is left of the budget as the expanded document is walked.
struct Tally {
    nodes_left: u64,
    bytes_left: u64,
    /// Which budget ran out; the walk's error then means only that.
    exceeded: Option<&'static str>,
}

impl Tally {
    fn node<E: serde::de::Error>(&mut self, bytes: usize) -> Result<(), E> {
        let exceeded = match (
            self.nodes_left.checked_sub(1),
            self.bytes_left.checked_sub(bytes as u64),
        ) {
            (Some(nodes), Some(bytes)) => {
                (self.nodes_left, self.bytes_left) = (nodes, bytes);
                return Ok(());
            }
            (None, _) => NODES,
            (_, None) => BYTES,
        };
        self.exceeded = Some(exceeded);
        Err(E::custom("document contains excessive aliasing"))
    }
}

impl<'de> DeserializeSeed<'de> for &mut Tally {
    type Value = ();

    fn deserialize<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for &mut Tally {
    type Value = ();

    fn expecting(&self, formatter: &mut std::fmt::Formatter) -> std::fmt::Result {
        formatter.write_str("any YAML node")
    }

    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.node(0)
    }

    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.node(0)
    }

    fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<(), E> {
        self.node(0)
    }

    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.node(0)
    }

    fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<(), E> {
        self.node(0)
    }

    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.node(0)
    }

    fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<(), E> {
        self.node(text.len())
    }

    fn visit_bytes<E: serde::de::Error>(self, bytes: &[u8]) -> Result<(), E> {
        self.node(bytes.len())
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.node(0)
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.node(0)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_newtype_struct<D: serde::Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<(), D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.node(0)?;
        while seq.next_element_seed(&mut *self)?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.node(0)?;
        while map.next_key_seed(&mut *self)?.is_some() {
            map.next_value_seed(&mut *self)?;
        }
        Ok(())
    }

    /// A tagged node (`!tag value`): the tag, then what it tags.
    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        self.node(0)?;
        let (serde::de::IgnoredAny, variant) = data.variant()?;
        variant.newtype_variant_seed(self)
    }
}

#[cfg(test)]
#[path = "aliasing_tests.rs"]
mod tests;
