//! StatusManager's pure core (§7 of the reference): the versioned pod-status cache, condition
//! ownership, `mergePodStatus` and `TerminatePod`'s final status. The actor, the pod watch and
//! the API sync build on these.

pub mod cache;
pub mod conditions;
pub mod merge;
pub mod patch;
pub mod terminate;
#[cfg(test)]
mod tests;
