//! Policy calculation: the cluster as the datastore describes it ([`Cluster`], fed datastore
//! updates) and the reference evaluator ([`explain`]) that judges a packet at an endpoint
//! straight from the seeds' semantics.

pub mod cluster;
pub mod explain;

pub use cluster::{Applied, Cluster, Endpoint, EndpointKey, Profile, Tier};
pub use explain::{Direction, Explanation, Packet, Reason, RuleSource, Verdict, explain};
