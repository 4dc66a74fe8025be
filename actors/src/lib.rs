//! nodepulse's node actors: NodeStatus, Lease, RuntimeProbe, EvictionSignal and StatusManager,
//! the typed messages they exchange and the ports (traits) through which they reach the API
//! server and the host. The actors arrive one issue at a time; this crate holds nothing else.
