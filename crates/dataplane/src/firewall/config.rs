//! The Felix parameters that shape the rendered rules.

use std::fmt;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::str::FromStr;

/// Where workloads ask for cloud-init metadata: TCP to 169.254.169.254:80 (the OpenStack / EC2
/// convention). Felix DNATs it to `MetadataAddr:MetadataPort`.
pub const METADATA_SERVICE: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(169, 254, 169, 254), 80);

/// What happens to traffic from a workload to its own host once its outbound policy allowed it
/// (`DefaultEndpointToHostAction`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointToHostAction {
    Drop,
    /// Carry on with the rest of the host's INPUT chain.
    Return,
    Accept,
}

impl EndpointToHostAction {
    pub fn target(self) -> &'static str {
        match self {
            EndpointToHostAction::Drop => "DROP",
            EndpointToHostAction::Return => "RETURN",
            EndpointToHostAction::Accept => "ACCEPT",
        }
    }
}

impl FromStr for EndpointToHostAction {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_uppercase().as_str() {
            "DROP" => Ok(EndpointToHostAction::Drop),
            "RETURN" => Ok(EndpointToHostAction::Return),
            "ACCEPT" => Ok(EndpointToHostAction::Accept),
            _ => Err(format!(
                "invalid DefaultEndpointToHostAction {text:?}: expected DROP, RETURN or ACCEPT"
            )),
        }
    }
}

/// What every drop becomes (`DropActionOverride`); the LOG variants log first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropAction {
    Drop,
    Accept,
    LogAndDrop,
    LogAndAccept,
}

impl DropAction {
    /// The iptables rule tails for a drop: one rule, or a LOG rule and then the verdict.
    pub fn targets(self) -> &'static [&'static str] {
        match self {
            DropAction::Drop => &["DROP"],
            DropAction::Accept => &["ACCEPT"],
            DropAction::LogAndDrop => &["LOG --log-prefix \"calico-drop: \"", "DROP"],
            DropAction::LogAndAccept => &["LOG --log-prefix \"calico-drop: \"", "ACCEPT"],
        }
    }
}

impl FromStr for DropAction {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        match text.to_ascii_uppercase().as_str() {
            "DROP" => Ok(DropAction::Drop),
            "ACCEPT" => Ok(DropAction::Accept),
            "LOG-AND-DROP" => Ok(DropAction::LogAndDrop),
            "LOG-AND-ACCEPT" => Ok(DropAction::LogAndAccept),
            _ => Err(format!(
                "invalid DropActionOverride {text:?}: expected DROP, ACCEPT, LOG-and-DROP or LOG-and-ACCEPT"
            )),
        }
    }
}

/// The packet mark bits the rules use, taken from the configured mask (`IptablesMarkMask`):
/// `accept` (a policy or profile allowed the packet), `pass` (a policy said `next-tier`) and
/// `untracked` (an untracked policy allowed the packet in the raw table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MarkBits {
    pub accept: u32,
    pub pass: u32,
    pub untracked: u32,
}

impl MarkBits {
    /// The three lowest bits of `mask`; the mask needs at least three.
    pub fn from_mask(mask: u32) -> Result<MarkBits, String> {
        let lowest = |m: u32| m & m.wrapping_neg();
        let accept = lowest(mask);
        let pass = lowest(mask & !accept);
        let untracked = lowest(mask & !accept & !pass);
        if untracked == 0 {
            return Err(format!(
                "IptablesMarkMask {mask:#x} has fewer than 3 bits; Calico needs 3"
            ));
        }
        Ok(MarkBits {
            accept,
            pass,
            untracked,
        })
    }

    /// The accept and pass bits (cleared at the start of each endpoint's evaluation).
    pub fn both(self) -> u32 {
        self.accept | self.pass
    }
}

impl Default for MarkBits {
    fn default() -> Self {
        MarkBits::from_mask(0xff00_0000).expect("the default mask has 8 bits")
    }
}

/// The name prefixes of workload interfaces (`InterfacePrefix`: `cali`, `tap` for OpenStack,
/// or several, comma-separated, e.g. `cali,tap` on a compute host that also runs containers).
/// Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterfacePrefixes(Vec<String>);

impl InterfacePrefixes {
    /// `prefixes` in order, each once; `None` when there is none.
    pub fn new<S: Into<String>>(prefixes: impl IntoIterator<Item = S>) -> Option<Self> {
        let mut list: Vec<String> = Vec::new();
        for prefix in prefixes {
            let prefix = prefix.into();
            if !list.contains(&prefix) {
                list.push(prefix);
            }
        }
        (!list.is_empty()).then_some(InterfacePrefixes(list))
    }

    /// Whether `name` is a workload interface's.
    pub fn matches(&self, name: &str) -> bool {
        self.0
            .iter()
            .any(|prefix| name.starts_with(prefix.as_str()))
    }

    /// iptables interface wildcards, one per prefix: `cali+`, `tap+`.
    pub fn wildcards(&self) -> impl Iterator<Item = String> + '_ {
        self.0.iter().map(|prefix| format!("{prefix}+"))
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(String::as_str)
    }
}

impl std::fmt::Display for InterfacePrefixes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0.join(","))
    }
}

impl Default for InterfacePrefixes {
    fn default() -> Self {
        InterfacePrefixes(vec!["cali".to_owned()])
    }
}

/// Everything the renderer needs besides the desired state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderConfig {
    /// Interfaces with one of these prefixes are workload interfaces (`InterfacePrefix`).
    pub interface_prefixes: InterfacePrefixes,
    pub marks: MarkBits,
    pub endpoint_to_host: EndpointToHostAction,
    pub drop_action: DropAction,
    /// TCP ports always open inbound on host endpoints (`FailsafeInboundHostPorts`).
    pub failsafe_inbound: Vec<u16>,
    /// TCP ports always open outbound from host endpoints (`FailsafeOutboundHostPorts`).
    pub failsafe_outbound: Vec<u16>,
    /// The metadata server (`MetadataAddr:MetadataPort`): workloads' TCP to
    /// [`METADATA_SERVICE`] is DNATed here (nat `cali-PREROUTING`) and accepted to here before
    /// policy (`cali-INPUT`). `None` (`MetadataAddr=None`): neither rule.
    pub metadata: Option<SocketAddrV4>,
    /// Flow logs (`FlowLogsEnabled`): every rule that takes an action also logs the packet to
    /// NFLOG with a prefix naming the step (see [`crate::flowlog`]).
    pub flow_logs: bool,
}

impl Default for RenderConfig {
    fn default() -> Self {
        RenderConfig {
            interface_prefixes: InterfacePrefixes::default(),
            marks: MarkBits::default(),
            endpoint_to_host: EndpointToHostAction::Drop,
            drop_action: DropAction::Drop,
            failsafe_inbound: vec![22],
            failsafe_outbound: vec![2379, 2380, 4001, 7001],
            metadata: Some(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8775)),
            flow_logs: false,
        }
    }
}

impl fmt::Display for MarkBits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "accept {:#x}, pass {:#x}, untracked {:#x}",
            self.accept, self.pass, self.untracked
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mark_bits_are_the_lowest_two_of_the_mask() {
        let bits = MarkBits::from_mask(0x0ff0_0000).unwrap();
        assert_eq!(
            (bits.accept, bits.pass, bits.untracked),
            (0x0010_0000, 0x0020_0000, 0x0040_0000)
        );
        for mask in [0x8000_0000, 0x3, 0] {
            let error = MarkBits::from_mask(mask).unwrap_err();
            assert_eq!(
                error,
                format!("IptablesMarkMask {mask:#x} has fewer than 3 bits; Calico needs 3")
            );
        }
    }

    #[test]
    fn actions_parse_case_insensitively_with_clear_errors() {
        assert_eq!("log-and-drop".parse(), Ok(DropAction::LogAndDrop));
        assert_eq!("Return".parse(), Ok(EndpointToHostAction::Return));
        let err = "REJECT".parse::<DropAction>().unwrap_err();
        assert!(err.contains("DropActionOverride"), "{err}");
    }
}
