//! Policy calculation: the cluster as the datastore describes it ([`Cluster`], fed datastore
//! updates) and the reference evaluator ([`explain`]) that judges a packet at an endpoint
//! straight from the seeds' semantics.

pub mod calculator;
pub mod cluster;
pub mod desired;
pub mod explain;
pub mod labels;

pub use calculator::{Calculator, Changes};
pub use cluster::{
    Applied, Cluster, Endpoint, EndpointKey, EndpointMap, Profile, ProfileList, Tier,
};
pub use desired::{
    DesiredState, EndpointProgram, IpSet, IpSetSource, PolicyId, Rules, TierProgram, desired_state,
};
pub use explain::{Direction, Explanation, Packet, Reason, RuleSource, Verdict, explain};
pub use labels::{Interner, LabelSet};
