//! The pieces of the table as rendered: a chain and a set or map. `ruleset.rs` puts the whole
//! table together from them; `tiers.rs` renders a tier's dispatch in them.

use std::collections::BTreeSet;

use calico_linux::nft::{
    BaseChain, ChainPolicy, ChainSpec, ChainType, Element, Hook, Rule, SetSpec,
};

/// A chain as rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NftChain {
    pub name: String,
    pub base: Option<BaseChain>,
    pub rules: Vec<Rule>,
}

impl NftChain {
    pub fn new(name: &str) -> NftChain {
        NftChain {
            name: name.to_owned(),
            base: None,
            rules: Vec::new(),
        }
    }

    pub(super) fn base(name: &str, kind: ChainType, hook: Hook, priority: i32) -> NftChain {
        NftChain {
            name: name.to_owned(),
            base: Some(BaseChain {
                kind,
                hook,
                priority,
                policy: ChainPolicy::Accept,
            }),
            rules: Vec::new(),
        }
    }

    pub fn spec(&self) -> ChainSpec {
        ChainSpec {
            name: self.name.clone(),
            base: self.base,
        }
    }
}

/// A set or map as rendered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NftSet {
    pub spec: SetSpec,
    pub elements: BTreeSet<Element>,
}
