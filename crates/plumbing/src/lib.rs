//! Plugging a workload in: one owner of the veth, its host-side settings and the container's
//! routes, for the `calico` CNI plugin (ADD) and the Docker driver (`Join`).
//!
//! | module | owns |
//! | --- | --- |
//! | `plan` | pure: the steps with their undo — CNI's whole ADD ([`plan()`]), the Docker driver's `Join` before dockerd moves the container end ([`veth_plan`]) and a second attachment's source routing once it has ([`routes_plan`]) |
//! | `execute` | runs a plan against the kernel, undoing what it did when a step fails; the host side's IPv6 link-local address |
//! | `routes` | the container's routes: which an attachment owns, where a new one goes (metric, standby), source rules, reading them |
//! | `error` | [`PlumbingError`] |

mod error;
mod execute;
pub mod plan;
pub mod routes;

pub use error::PlumbingError;
pub use execute::{LINK_LOCAL_WAIT, Plumbed, execute, host_link_local, undo};
pub use plan::{
    Attachment, Gateway, Planned, PlannedRoute, PlumbPlan, RoutePlacement, Side, Step, Undo,
    gateway_routes, plan, routes_plan, veth_plan,
};
pub use routes::{
    ContainerRoute, FIRST_METRIC, IPV4_GATEWAY, MAIN_TABLE, Placement, RULE_PRIORITY, SourceRule,
};
