//! The Calico etcd data model: typed keys of the seed keyspace, typed objects with validation,
//! and the selector language.
//!
//! | module | owns |
//! | --- | --- |
//! | `key` | every key of the seed keyspace: `Key::parse` and `Display` round-trip |
//! | `value` | `parse_value(&Key, text)`: the validated value of a key, checked against the key |
//! | `endpoint` | workload and host endpoints |
//! | `profile`, `rule`, `labels`, `policy` | profiles (rules, tags, labels), rules, tiers and policies |
//! | `pool`, `ipam` | IP pools; IPAM blocks, handles and host affinities |
//! | `bundle` | the JSON bundle of keys and values that calicoctl and the lab read and write |
//! | `space` | address spaces: the translation prefix, private spaces and their IDs, Neutron mappings; the rules between their objects |
//! | `bgp` | AS numbers, node mesh, BGP peers |
//! | `status` | what Felix reports back |
//! | `flow` | flow records: what Felix reports to the flow aggregator (not stored in etcd) |
//! | `tunnel` | a host's VXLAN tunnel endpoint |
//! | `mac` | `MacAddr`: the one MAC address type (parse, print, unicast, EUI-64 link-local) |
//! | `names` | the rules for ids and key segments |
//! | `error` | `ValidationError` (field path + reason), `from_json` for every object, and `invalid_warning`: the one WARNING line for a value treated as missing |
//! | `selector` | the selector language: parser, evaluator, canonical form |

pub mod bgp;
pub mod bundle;
pub mod endpoint;
pub mod error;
pub mod flow;
pub mod ipam;
pub mod key;
pub mod labels;
pub mod leftout;
pub mod mac;
pub mod names;
pub mod policy;
pub mod pool;
pub mod profile;
pub mod rule;
pub mod selector;
pub mod space;
pub mod status;
pub mod tunnel;
pub mod value;

pub use error::{Validate, ValidationError, from_json, invalid_warning, to_json};
pub use key::Key;
pub use mac::MacAddr;
pub use rule::IpVersion;
pub use value::{Value, parse_value};
