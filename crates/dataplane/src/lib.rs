//! Desired state to kernel terms. Calico's firewall semantics are decided once
//! ([`firewall`]: the calculator's [`DesiredState`](calico_calc::DesiredState) to a typed model)
//! and encoded by each backend: [`iptables`] (`iptables-restore` and `ipset restore` text, and
//! the [`Dataplane`] driver) and [`nft`] (one `inet calico` table over netlink,
//! [`NftDataplane`]); [`backend`] is the enum over both. Routes, VXLAN and IPIP plans beside.

pub mod backend;
pub mod comment;
pub mod firewall;
pub mod flowlog;
pub mod ipip;
pub mod iptables;
pub mod nft;
pub mod routing;
pub mod vxlan;

pub use backend::{
    Backend, BackendKind, BackendReader, BackendSnapshot, DataplaneError, remove_iptables,
};
pub use firewall::config::{
    DropAction, EndpointToHostAction, InterfacePrefixes, MarkBits, RenderConfig,
};
pub use ipip::{Ipip, IpipChanges, IpipPlan};
pub use iptables::drift::{KernelReader, KernelSnapshot};
pub use iptables::driver::{Dataplane, PlaneSync, Repairs, SyncPlan, TableSync, Written};
pub use iptables::{
    FilterTable, IpVersion, ipset_name, kernel_jumps, policy_chain, profile_chain, render_filter,
    render_ipset_updates, render_ipsets, render_nat, render_pool_ipsets, render_raw,
};
pub use nft::{NftDataplane, calico_table};
pub use routing::{
    InterfacePlan, KernelLink, KernelRoutingState, Routing, RoutingChanges, RoutingError,
    RoutingPlan,
};
pub use vxlan::{Vxlan, VxlanChanges, VxlanPlan};
