//! Desired state to kernel terms. The renderers ([`render`]) are pure functions from the
//! calculator's [`DesiredState`](calico_calc::DesiredState) to the text `iptables-restore` and
//! `ipset restore` read; the [`Dataplane`] applies them to a kernel through `calico-linux`.

pub mod backend;
pub mod comment;
pub mod drift;
pub mod driver;
pub mod flowlog;
pub mod ipip;
pub mod nft;
pub mod render;
pub mod routing;
pub mod stamp;
pub mod vxlan;

pub use backend::{
    Backend, BackendKind, BackendReader, BackendSnapshot, DataplaneError, remove_iptables,
};
pub use drift::{KernelReader, KernelSnapshot};
pub use driver::{Dataplane, PlaneSync, Repairs, SyncPlan, TableSync, Written};
pub use ipip::{Ipip, IpipChanges, IpipPlan};
pub use nft::{NftDataplane, calico_table};
pub use render::config::{
    DropAction, EndpointToHostAction, InterfacePrefixes, MarkBits, RenderConfig,
};
pub use render::{
    FilterTable, IpVersion, ipset_name, kernel_jumps, policy_chain, profile_chain, render_filter,
    render_ipset_updates, render_ipsets, render_nat, render_pool_ipsets, render_raw,
};
pub use routing::{
    InterfacePlan, KernelLink, KernelRoutingState, Routing, RoutingChanges, RoutingError,
    RoutingPlan,
};
pub use vxlan::{Vxlan, VxlanChanges, VxlanPlan};
