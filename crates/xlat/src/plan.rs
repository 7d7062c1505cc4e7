//! The translator's setup as data: the kernel steps that put one workload's interface in an
//! address space, and the routes toward another host's blocks. `exec::apply` runs them.
//!
//! Per workload interface (host side of its veth), in dependency order:
//!
//! | step | why |
//! | ---- | --- |
//! | `sysctl net.ipv6.conf.all.forwarding=1` | the translated packet is routed as IPv6 |
//! | `sysctl net.ipv6.conf.<if>.disable_ipv6=0` | IPv6 input on the interface |
//! | write `<dir>/<if>.o` | the translator with the space's /96 patched in |
//! | `tc qdisc replace dev <if> clsact` | the hook points |
//! | `tc filter replace … ingress … sec tc/v4to6` | from the workload: IPv4 → IPv6 |
//! | `tc filter replace … egress … sec tc/v6to4` | to the workload: IPv6 → IPv4, own space only |
//! | `ip -6 route replace <prefix>:<ID>::W.X.Y.Z/128 dev <if>` | the workload, by its space's address |
//! | `ip -6 neigh replace … lladdr <mac> nud permanent` | the workload speaks no IPv6: no ND |
//!
//! The routes are IPv6 routes: two local workloads with the same IPv4 address in two spaces
//! have two different /128s, so the host needs no per-space routing table, mark or VRF.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::Ipv4Net;

use crate::error::ObjectError;
use crate::mapping::Space;
use crate::object::{self, EGRESS_SECTION, INGRESS_SECTION};

/// The bytes an IPv6 header adds to an IPv4 one without options: a workload's MTU is the
/// fabric's minus this, or its full-size packets cannot cross.
pub const HEADER_GROWTH: u32 = 20;

/// One kernel step.
#[derive(Clone, PartialEq, Eq)]
pub enum Step {
    Sysctl {
        key: String,
        value: String,
    },
    WriteObject {
        path: PathBuf,
        bytes: Vec<u8>,
    },
    RemoveFile {
        path: PathBuf,
    },
    /// `program args…`; `tolerate_missing` for removals of what may already be gone.
    Run {
        program: &'static str,
        args: Vec<String>,
        tolerate_missing: bool,
    },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Sysctl { key, value } => write!(f, "sysctl -w {key}={value}"),
            Step::WriteObject { path, bytes } => {
                write!(f, "write {} ({} bytes)", path.display(), bytes.len())
            }
            Step::RemoveFile { path } => write!(f, "rm -f {}", path.display()),
            Step::Run { program, args, .. } => write!(f, "{program} {}", args.join(" ")),
        }
    }
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

/// A workload in a private address space, as its compute host sees it.
#[derive(Debug, Clone)]
pub struct Workload {
    pub space: Space,
    /// The host side of the workload's veth.
    pub host_if: String,
    pub ipv4: Ipv4Addr,
    /// The workload's MAC, for the permanent neighbour entry.
    pub mac: String,
    /// Where the per-interface translator objects are written.
    pub object_dir: PathBuf,
}

impl Workload {
    fn object_path(&self) -> PathBuf {
        self.object_dir.join(format!("{}.o", self.host_if))
    }
}

fn run(program: &'static str, args: &[&str]) -> Step {
    let args = args.iter().map(|a| (*a).to_owned()).collect();
    Step::Run {
        program,
        args,
        tolerate_missing: false,
    }
}

fn run_tolerant(program: &'static str, args: &[&str]) -> Step {
    let args = args.iter().map(|a| (*a).to_owned()).collect();
    Step::Run {
        program,
        args,
        tolerate_missing: true,
    }
}

/// The steps that translate `workload`'s traffic and deliver its space's packets to it.
pub fn attach(workload: &Workload) -> Result<Vec<Step>, ObjectError> {
    let dev = workload.host_if.as_str();
    let path = workload.object_path();
    let obj = path.to_string_lossy().into_owned();
    let v6 = workload.space.to_v6(workload.ipv4).to_string();
    let filter = |direction, section| {
        let args = [
            "filter", "replace", "dev", dev, direction, "pref", "1", "handle", "1",
        ];
        let bpf = ["bpf", "direct-action", "obj", obj.as_str(), "sec", section];
        run("tc", &[&args[..], &bpf[..]].concat())
    };
    Ok(vec![
        Step::Sysctl {
            key: "net.ipv6.conf.all.forwarding".into(),
            value: "1".into(),
        },
        Step::Sysctl {
            key: format!("net.ipv6.conf.{dev}.disable_ipv6"),
            value: "0".into(),
        },
        Step::WriteObject {
            path,
            bytes: object::for_space(&workload.space)?,
        },
        run("tc", &["qdisc", "replace", "dev", dev, "clsact"]),
        filter("ingress", INGRESS_SECTION),
        filter("egress", EGRESS_SECTION),
        run(
            "ip",
            &["-6", "route", "replace", &format!("{v6}/128"), "dev", dev],
        ),
        run(
            "ip",
            &[
                "-6",
                "neigh",
                "replace",
                &v6,
                "lladdr",
                &workload.mac,
                "dev",
                dev,
                "nud",
                "permanent",
            ],
        ),
    ])
}

/// The steps that undo `attach` (each tolerates what is already gone).
pub fn detach(workload: &Workload) -> Vec<Step> {
    let dev = workload.host_if.as_str();
    let v6 = workload.space.to_v6(workload.ipv4).to_string();
    vec![
        run_tolerant(
            "ip",
            &["-6", "route", "del", &format!("{v6}/128"), "dev", dev],
        ),
        run_tolerant("ip", &["-6", "neigh", "del", &v6, "dev", dev]),
        run_tolerant("tc", &["qdisc", "del", "dev", dev, "clsact"]),
        Step::RemoveFile {
            path: workload.object_path(),
        },
    ]
}

/// The route toward another host's block of a space: what BGP will distribute (a /26 is one
/// /122 route); here a static step.
pub fn remote_block(space: &Space, block: Ipv4Net, via: Ipv6Addr, dev: &str) -> Step {
    let net = space.block(block.trunc()).to_string();
    run(
        "ip",
        &[
            "-6",
            "route",
            "replace",
            &net,
            "via",
            &via.to_string(),
            "dev",
            dev,
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapping::Prefix;

    #[test]
    fn attach_renders_the_documented_steps() {
        let space = Prefix::new("fd00:ca1::/48".parse().unwrap())
            .unwrap()
            .space(1)
            .unwrap();
        let workload = Workload {
            space,
            host_if: "cali1".into(),
            ipv4: "10.0.0.5".parse().unwrap(),
            mac: "02:00:00:00:00:05".into(),
            object_dir: "/run/calico/xlat".into(),
        };
        let text: Vec<String> = attach(&workload)
            .unwrap()
            .iter()
            .map(Step::to_string)
            .collect();
        let object_size = object::for_space(&space).unwrap().len();
        let expected = [
            "sysctl -w net.ipv6.conf.all.forwarding=1".to_owned(),
            "sysctl -w net.ipv6.conf.cali1.disable_ipv6=0".to_owned(),
            format!("write /run/calico/xlat/cali1.o ({object_size} bytes)"),
            "tc qdisc replace dev cali1 clsact".to_owned(),
            "tc filter replace dev cali1 ingress pref 1 handle 1 bpf direct-action obj /run/calico/xlat/cali1.o sec tc/v4to6".to_owned(),
            "tc filter replace dev cali1 egress pref 1 handle 1 bpf direct-action obj /run/calico/xlat/cali1.o sec tc/v6to4".to_owned(),
            "ip -6 route replace fd00:ca1:0:1::a00:5/128 dev cali1".to_owned(),
            "ip -6 neigh replace fd00:ca1:0:1::a00:5 lladdr 02:00:00:00:00:05 dev cali1 nud permanent".to_owned(),
        ];
        assert_eq!(text, expected);
        let route = remote_block(
            &space,
            "10.0.0.0/26".parse().unwrap(),
            "fd00:f::2".parse().unwrap(),
            "eth0",
        );
        assert_eq!(
            route.to_string(),
            "ip -6 route replace fd00:ca1:0:1::a00:0/122 via fd00:f::2 dev eth0"
        );
    }
}
