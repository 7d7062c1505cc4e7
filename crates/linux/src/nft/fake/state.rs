//! The fake kernel's table and what each operation does to it, with the kernel's refusals
//! (see `fake.rs` for the list).

use std::collections::{BTreeMap, BTreeSet};

use ipnet::IpNet;
use nix::errno::Errno;

use crate::nft::elements::{clashes, fits, same_key};
use crate::nft::forms::cut_comment;
use crate::nft::{
    BaseChain, ChainSnapshot, ChainSpec, ChainType, Element, Expr, Hook, Op, Rule, RuleSnapshot,
    SetKind, SetSnapshot, SetSpec, TableSnapshot, Verdict,
};

/// The kernel's jump stack: a chain this many jumps below a base chain is refused.
const JUMP_STACK: usize = 16;

/// A refusal: the errno the kernel gives, and what exactly.
pub(super) type Refusal = (Errno, String);

#[derive(Debug, Default, Clone)]
pub(super) struct State {
    chains: BTreeMap<String, Chain>,
    sets: BTreeMap<String, Set>,
    last_handle: u64,
}

#[derive(Debug, Clone)]
struct Chain {
    spec: ChainSpec,
    rules: Vec<(u64, Rule)>,
}

#[derive(Debug, Clone)]
struct Set {
    spec: SetSpec,
    /// Each element and when it was added: the pipapo backend of protocol . port maps finds
    /// the oldest interval that holds a key.
    elements: BTreeMap<Element, u64>,
}

fn missing(what: &str, name: &str) -> Refusal {
    (Errno::ENOENT, format!("{what} {name} does not exist"))
}

pub(super) fn apply_op(table: &mut Option<State>, op: &Op) -> Result<(), Refusal> {
    match op {
        Op::AddTable => {
            table.get_or_insert_with(State::default);
            return Ok(());
        }
        Op::DeleteTable => {
            return table
                .take()
                .map(|_| ())
                .ok_or_else(|| missing("table", "of this handle"));
        }
        _ => {}
    }
    let state = table
        .as_mut()
        .ok_or_else(|| missing("table", "of this handle"))?;
    match op {
        Op::AddTable | Op::DeleteTable => unreachable!("handled above"),
        Op::AddChain(spec) => state.add_chain(spec),
        Op::FlushChain(chain) => {
            state.chain_mut(chain)?.rules.clear();
            Ok(())
        }
        Op::DeleteChain(chain) => state.delete_chain(chain),
        Op::AddRule { chain, rule } => state.add_rule(chain, rule),
        Op::AddSet(spec) => state.add_set(spec),
        Op::FlushSet(set) => {
            state.set_mut(set)?.elements.clear();
            Ok(())
        }
        Op::DeleteSet(set) => state.delete_set(set),
        Op::AddElements { set, elements } => {
            elements.iter().try_for_each(|e| state.add_element(set, e))
        }
        Op::DeleteElements { set, elements } => elements
            .iter()
            .try_for_each(|e| state.delete_element(set, e)),
    }
}

/// The chains a verdict jumps or goes to.
fn target(v: &Verdict) -> Option<&str> {
    match v {
        Verdict::Jump(c) | Verdict::Goto(c) => Some(c),
        _ => None,
    }
}

fn element_target(e: &Element) -> Option<&str> {
    match e {
        Element::Ifname { verdict, .. } | Element::ProtoPorts { verdict, .. } => target(verdict),
        _ => None,
    }
}

/// The sets a rule looks up.
fn rule_sets(rule: &Rule) -> impl Iterator<Item = &str> {
    rule.exprs.iter().filter_map(|e| match e {
        Expr::AddrInSet { set, .. } => Some(set.as_str()),
        Expr::Vmap { map, .. } => Some(map.as_str()),
        _ => None,
    })
}

impl State {
    /// The kind of a set of the table.
    pub(super) fn kind(&self, set: &str) -> Option<SetKind> {
        self.sets.get(set).map(|s| s.spec.kind)
    }

    /// The elements of a set of the table (none without the set).
    pub(super) fn elements(&self, set: &str) -> BTreeSet<Element> {
        self.sets
            .get(set)
            .map(|s| s.elements.keys().cloned().collect())
            .unwrap_or_default()
    }

    pub(super) fn snapshot(&self) -> TableSnapshot {
        TableSnapshot {
            chains: self
                .chains
                .iter()
                .map(|(name, c)| {
                    let rules = c
                        .rules
                        .iter()
                        .map(|(handle, rule)| RuleSnapshot {
                            handle: *handle,
                            digest: Some(crate::nft::rule_digest(rule)),
                            comment: rule.comment.as_deref().map(|c| cut_comment(c).to_owned()),
                        })
                        .collect();
                    (
                        name.clone(),
                        ChainSnapshot {
                            spec: c.spec.clone(),
                            rules,
                        },
                    )
                })
                .collect(),
            sets: self
                .sets
                .iter()
                .map(|(name, s)| {
                    let spec = SetSpec {
                        comment: s.spec.comment.as_deref().map(|c| cut_comment(c).to_owned()),
                        ..s.spec.clone()
                    };
                    (
                        name.clone(),
                        SetSnapshot {
                            spec,
                            elements: s.elements.keys().cloned().collect(),
                        },
                    )
                })
                .collect(),
        }
    }

    fn chain_mut(&mut self, name: &str) -> Result<&mut Chain, Refusal> {
        self.chains
            .get_mut(name)
            .ok_or_else(|| missing("chain", name))
    }

    fn set_mut(&mut self, name: &str) -> Result<&mut Set, Refusal> {
        self.sets.get_mut(name).ok_or_else(|| missing("set", name))
    }

    fn add_chain(&mut self, spec: &ChainSpec) -> Result<(), Refusal> {
        if let Some(existing) = self.chains.get_mut(&spec.name) {
            return match (&mut existing.spec.base, &spec.base) {
                (_, None) => Ok(()),
                (None, Some(_)) => Err((
                    Errno::EEXIST,
                    format!("chain {} exists without a hook", spec.name),
                )),
                (Some(old), Some(new))
                    if (old.kind, old.hook, old.priority) != (new.kind, new.hook, new.priority) =>
                {
                    Err((
                        Errno::EEXIST,
                        format!(
                            "chain {} exists with another type, hook or priority",
                            spec.name
                        ),
                    ))
                }
                (Some(old), Some(new)) => {
                    old.policy = new.policy;
                    Ok(())
                }
            };
        }
        if let Some(base) = &spec.base
            && base.kind == ChainType::Nat
            && (base.hook == Hook::Forward || base.priority <= -200)
        {
            return Err((
                Errno::EOPNOTSUPP,
                "a nat chain cannot hook forward or run at priority -200 or below".into(),
            ));
        }
        self.chains.insert(
            spec.name.clone(),
            Chain {
                spec: spec.clone(),
                rules: Vec::new(),
            },
        );
        Ok(())
    }

    /// Who refers to `chain`: a rule's jump or goto, or a map element's.
    fn chain_users(&self, chain: &str) -> Option<String> {
        for (name, c) in &self.chains {
            for (_, rule) in &c.rules {
                let jumps = rule
                    .exprs
                    .iter()
                    .any(|e| matches!(e, Expr::Verdict(v) if target(v) == Some(chain)));
                if jumps {
                    return Some(format!("a rule of chain {name} jumps to it"));
                }
            }
        }
        self.sets.iter().find_map(|(name, s)| {
            s.elements
                .keys()
                .any(|e| element_target(e) == Some(chain))
                .then(|| format!("an element of map {name} jumps to it"))
        })
    }

    fn delete_chain(&mut self, chain: &str) -> Result<(), Refusal> {
        if !self.chains.contains_key(chain) {
            return Err(missing("chain", chain));
        }
        // Its own rules go with it; references from elsewhere keep it.
        let rules = std::mem::take(&mut self.chain_mut(chain)?.rules);
        if let Some(user) = self.chain_users(chain) {
            self.chain_mut(chain)?.rules = rules;
            return Err((Errno::EBUSY, format!("chain {chain} is in use: {user}")));
        }
        self.chains.remove(chain);
        Ok(())
    }

    fn jump_target(&self, v: &Verdict) -> Result<(), Refusal> {
        let Some(chain) = target(v) else {
            return Ok(());
        };
        match self.chains.get(chain) {
            None => Err(missing("chain", chain)),
            Some(c) if c.spec.base.is_some() => Err((
                Errno::EOPNOTSUPP,
                format!("chain {chain} is a base chain: no jump or goto can reach it"),
            )),
            Some(_) => Ok(()),
        }
    }

    fn add_rule(&mut self, chain: &str, rule: &Rule) -> Result<(), Refusal> {
        if !self.chains.contains_key(chain) {
            return Err(missing("chain", chain));
        }
        for e in &rule.exprs {
            if let Expr::Verdict(v) = e {
                self.jump_target(v)?;
            }
        }
        if let Some(set) = rule_sets(rule).find(|s| !self.sets.contains_key(*s)) {
            return Err(missing("set", set));
        }
        self.last_handle += 1;
        let handle = self.last_handle;
        self.chain_mut(chain)?.rules.push((handle, rule.clone()));
        Ok(())
    }

    fn add_set(&mut self, spec: &SetSpec) -> Result<(), Refusal> {
        match self.sets.get(&spec.name) {
            // The kernel keeps the set as it is (its comment too).
            Some(s) if s.spec.kind == spec.kind => Ok(()),
            Some(_) => Err((
                Errno::EEXIST,
                format!("set {} exists as another kind", spec.name),
            )),
            None => {
                self.sets.insert(
                    spec.name.clone(),
                    Set {
                        spec: spec.clone(),
                        elements: BTreeMap::new(),
                    },
                );
                Ok(())
            }
        }
    }

    fn delete_set(&mut self, set: &str) -> Result<(), Refusal> {
        if !self.sets.contains_key(set) {
            return Err(missing("set", set));
        }
        let used = self
            .chains
            .iter()
            .find(|(_, c)| c.rules.iter().any(|(_, r)| rule_sets(r).any(|s| s == set)));
        if let Some((chain, _)) = used {
            return Err((
                Errno::EBUSY,
                format!("set {set} is in use by a rule of chain {chain}"),
            ));
        }
        self.sets.remove(set);
        Ok(())
    }

    fn add_element(&mut self, set: &str, e: &Element) -> Result<(), Refusal> {
        if let Some(v) = match e {
            Element::Ifname { verdict, .. } | Element::ProtoPorts { verdict, .. } => Some(verdict),
            _ => None,
        } {
            self.jump_target(v)?;
        }
        let target = self.sets.get(set).ok_or_else(|| missing("set", set))?;
        if !fits(e, target.spec.kind) {
            return Err((
                Errno::EINVAL,
                format!("element {e} is not of the kind of set {set}"),
            ));
        }
        let elements = &target.elements;
        let clash = match e {
            Element::ProtoPorts { proto, ports, .. } => {
                match oldest_holding(elements, *proto, ports.first) {
                    // The same interval again: fine with the same verdict.
                    Some(old) if same_key(old, e) => (old != e).then_some(old),
                    Some(old) => Some(old),
                    None => oldest_holding(elements, *proto, ports.last),
                }
            }
            _ => candidates(elements, e).find(|old| clashes(old, e)),
        };
        if let Some(clash) = clash {
            return Err((
                Errno::EEXIST,
                format!("element {e} clashes with element {clash}"),
            ));
        }
        self.last_handle += 1;
        let added = self.last_handle;
        self.set_mut(set)?
            .elements
            .entry(e.clone())
            .or_insert(added);
        Ok(())
    }

    fn delete_element(&mut self, set: &str, e: &Element) -> Result<(), Refusal> {
        let elements = &mut self.set_mut(set)?.elements;
        let found = match e {
            Element::ProtoPorts { proto, ports, .. } => {
                oldest_holding(elements, *proto, ports.first)
            }
            _ => elements.keys().find(|old| same_key(old, e)),
        };
        match found.cloned() {
            Some(old) => {
                elements.remove(&old);
                Ok(())
            }
            None => Err((Errno::ENOENT, format!("set {set} has no element {e}"))),
        }
    }

    /// The chains a chain's rules jump or go to, through verdicts and verdict maps.
    fn targets(&self, chain: &Chain) -> Vec<String> {
        let mut found = Vec::new();
        for (_, rule) in &chain.rules {
            for e in &rule.exprs {
                match e {
                    Expr::Verdict(v) => found.extend(target(v).map(str::to_owned)),
                    Expr::Vmap { map, .. } => {
                        let elements = self
                            .sets
                            .get(map)
                            .into_iter()
                            .flat_map(|s| s.elements.keys());
                        found.extend(elements.filter_map(element_target).map(str::to_owned));
                    }
                    _ => {}
                }
            }
        }
        found
    }

    /// How many jumps lie below `chain` at most (`None`: without end, a loop), memoized.
    fn height(
        &self,
        chain: &str,
        memo: &mut BTreeMap<String, Option<usize>>,
        path: &mut Vec<String>,
    ) -> Option<usize> {
        if let Some(h) = memo.get(chain) {
            return *h;
        }
        if path.iter().any(|p| p == chain) {
            return None;
        }
        let Some(c) = self.chains.get(chain) else {
            return Some(0);
        };
        path.push(chain.to_owned());
        let mut height = Some(0);
        for t in self.targets(c) {
            height = match (height, self.height(&t, memo, path)) {
                (Some(h), Some(below)) => Some(h.max(below + 1)),
                _ => None,
            };
        }
        path.pop();
        memo.insert(chain.to_owned(), height);
        height
    }

    /// The kernel's validation of `chain` entered at jump depth `level` (`nft_chain_validate`):
    /// no chain below it at the jump stack's depth (a loop never ends, so it gets there), and,
    /// from a base chain, no statement the base chain cannot run.
    fn validate_from(
        &self,
        chain: &str,
        base: Option<&BaseChain>,
        level: usize,
    ) -> Result<(), Refusal> {
        match self.height(chain, &mut BTreeMap::new(), &mut Vec::new()) {
            Some(h) if level + h < JUMP_STACK => {}
            _ => {
                return Err((
                    Errno::EMLINK,
                    format!("jumps from chain {chain} loop or nest {JUMP_STACK} deep"),
                ));
            }
        }
        let Some(base) = base else { return Ok(()) };
        let mut seen = BTreeSet::new();
        let mut todo = vec![chain.to_owned()];
        while let Some(name) = todo.pop() {
            let Some(c) = self.chains.get(&name) else {
                continue;
            };
            if !seen.insert(name.clone()) {
                continue;
            }
            for (_, rule) in &c.rules {
                for e in &rule.exprs {
                    allowed(e, base).map_err(|r| {
                        (
                            Errno::EOPNOTSUPP,
                            format!(
                                "chain {name} (run from a {:?} {:?} chain): {r}",
                                base.kind, base.hook
                            ),
                        )
                    })?;
                }
            }
            todo.extend(self.targets(c));
        }
        Ok(())
    }

    /// The validation at commit: every base chain and what it reaches.
    pub(super) fn validate(&self) -> Result<(), Refusal> {
        for (name, c) in &self.chains {
            if let Some(base) = &c.spec.base {
                self.validate_from(name, Some(base), 0)?;
            }
        }
        Ok(())
    }
}

/// Whether a base chain of this type and hook can run `e`.
fn allowed(e: &Expr, base: &BaseChain) -> Result<(), String> {
    let nat = |hooks: &[Hook], what: &str| {
        if base.kind == ChainType::Nat && hooks.contains(&base.hook) {
            Ok(())
        } else {
            Err(format!("{what} needs a nat chain on {hooks:?}"))
        }
    };
    match e {
        Expr::Dnat { .. } => nat(&[Hook::Prerouting, Hook::Output], "dnat"),
        Expr::Snat { .. } => nat(&[Hook::Postrouting, Hook::Input], "snat"),
        Expr::Masquerade => nat(&[Hook::Postrouting], "masquerade"),
        _ => Ok(()),
    }
}

/// The oldest protocol . port interval of `proto` that holds `port` (how pipapo finds an
/// element by a key, on insert and on delete).
fn oldest_holding(elements: &BTreeMap<Element, u64>, proto: u8, port: u16) -> Option<&Element> {
    elements
        .iter()
        .filter(|(e, _)| matches!(e, Element::ProtoPorts { proto: p, ports, .. } if *p == proto && ports.first <= port && port <= ports.last))
        .min_by_key(|(_, added)| **added)
        .map(|(e, _)| e)
}

/// The elements `e` could clash with: for a net, the nets that start inside it and the one
/// before it (nets that do not overlap each other, sorted by start); all others otherwise.
fn candidates<'a>(
    elements: &'a BTreeMap<Element, u64>,
    e: &Element,
) -> Box<dyn Iterator<Item = &'a Element> + 'a> {
    let Element::Net(net) = e else {
        return Box::new(elements.keys());
    };
    let (first, last) = match net {
        IpNet::V4(_) => (
            IpNet::new(net.network(), 0),
            IpNet::new(net.broadcast(), 32),
        ),
        IpNet::V6(_) => (
            IpNet::new(net.network(), 0),
            IpNet::new(net.broadcast(), 128),
        ),
    };
    let (first, last) = (
        Element::Net(first.expect("prefix 0")),
        Element::Net(last.expect("a host prefix")),
    );
    let before = elements.range(..first.clone()).next_back().map(|(e, _)| e);
    Box::new(
        before
            .into_iter()
            .chain(elements.range(first..=last).map(|(e, _)| e)),
    )
}
