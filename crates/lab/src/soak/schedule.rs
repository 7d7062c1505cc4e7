//! The soak's plan: which fault or change happens when, drawn from a seed. Pure, so that a run
//! can be replayed from its seed and the plan's promises (enough kills, one partition and one
//! stopped etcd member at a time, everything down brought back before the end) are tested
//! without a lab.

use std::time::Duration;

use crate::rng::Rng;

/// A process the soak kills with SIGKILL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Process {
    Felix,
    /// calico-node (BIRD, its child, lives on until the next calico-node stops it).
    Node,
    /// BIRD (calico-node starts it again).
    Bird,
}

/// One thing the soak does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Kill {
        host: usize,
        process: Process,
    },
    /// Starts Felix or calico-node again (BIRD is started by calico-node).
    Start {
        host: usize,
        process: Process,
    },
    /// Cuts a host off from every etcd member (its BGP sessions and workloads' traffic stay).
    Partition {
        host: usize,
    },
    Heal {
        host: usize,
    },
    StopMember {
        member: usize,
    },
    StartMember {
        member: usize,
    },
    /// Plugs a churn workload into the host.
    AddWorkload {
        host: usize,
    },
    /// Unplugs a churn workload: the `pick`th (modulo how many there are).
    RemoveWorkload {
        pick: u64,
    },
    /// Writes (or deletes) a churn policy, drawn from `pick`.
    EditPolicy {
        pick: u64,
    },
}

/// An action and when it happens, from the start of the soak.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub at: Duration,
    pub action: Action,
}

/// How much chaos, over how long.
#[derive(Debug, Clone)]
pub struct Rates {
    pub seed: u64,
    pub duration: Duration,
    pub hosts: usize,
    /// etcd members; with fewer than three, none is stopped (one would take etcd away).
    pub members: usize,
    /// The mean time between two kills.
    pub kill_every: Duration,
    /// How long a killed Felix or calico-node stays down: up to this.
    pub max_down: Duration,
    /// The mean time between the end of a partition and the start of the next.
    pub partition_every: Duration,
    pub min_partition: Duration,
    pub max_partition: Duration,
    /// The mean time between the restart of one etcd member and the stop of the next.
    pub member_every: Duration,
    pub max_member_down: Duration,
    /// The mean time between two workload or policy changes.
    pub churn_every: Duration,
}

impl Rates {
    /// The figures' soak: over ten minutes about 120 kills, a partition every one to two
    /// minutes of up to 60 s, an etcd member restarted every minute or so, a change every 2 s.
    pub fn standard(seed: u64, duration: Duration, hosts: usize, members: usize) -> Rates {
        let s = Duration::from_secs;
        Rates {
            seed,
            duration,
            hosts,
            members,
            kill_every: s(5),
            max_down: s(3),
            partition_every: s(60),
            min_partition: s(5),
            max_partition: s(60),
            member_every: s(45),
            max_member_down: s(15),
            churn_every: s(2),
        }
    }
}

/// The plan, in time order. Everything stopped, killed or cut off is brought back by the end.
pub fn plan(rates: &Rates) -> Vec<Step> {
    let mut steps = Vec::new();
    let end = rates.duration;
    kills(rates, &mut Rng::derive(rates.seed, 1), &mut steps);
    let partitions = partitions(rates, &mut Rng::derive(rates.seed, 2), &mut steps);
    if rates.members >= 3 {
        let mut rng = Rng::derive(rates.seed, 3);
        let mut at = rng.around(rates.member_every);
        while at < end {
            let member = rng.below(rates.members);
            let back = (at + rng.between(Duration::from_secs(2), rates.max_member_down)).min(end);
            outage(
                &mut steps,
                (at, Action::StopMember { member }),
                (back, Action::StartMember { member }),
            );
            at = back + rng.around(rates.member_every);
        }
    }
    let mut rng = Rng::derive(rates.seed, 4);
    let mut at = rng.around(rates.churn_every);
    while at < end {
        let action = match rng.below(10) {
            0..=3 => {
                // A host that is not cut off from etcd (its CNI plugin could not reach it).
                let cut = |host: usize| {
                    partitions
                        .iter()
                        .any(|&(h, from, to)| h == host && from <= at && at < to)
                };
                let free: Vec<usize> = (0..rates.hosts).filter(|&h| !cut(h)).collect();
                match free.is_empty() {
                    true => Action::EditPolicy {
                        pick: rng.next_u64(),
                    },
                    false => Action::AddWorkload {
                        host: *rng.pick(&free),
                    },
                }
            }
            4..=6 => Action::RemoveWorkload {
                pick: rng.next_u64(),
            },
            _ => Action::EditPolicy {
                pick: rng.next_u64(),
            },
        };
        steps.push(Step { at, action });
        at += rng.around(rates.churn_every);
    }
    steps.sort_by_key(|step| step.at);
    steps
}

/// Something taken away at one time and given back at another.
fn outage(steps: &mut Vec<Step>, down: (Duration, Action), up: (Duration, Action)) {
    steps.push(Step {
        at: down.0,
        action: down.1,
    });
    steps.push(Step {
        at: up.0,
        action: up.1,
    });
}

/// Kills at random hosts: Felix, calico-node or BIRD; a killed Felix or calico-node starts
/// again after up to `max_down`, and is not killed again while it is down.
fn kills(rates: &Rates, rng: &mut Rng, steps: &mut Vec<Step>) {
    let mut back_at = vec![[Duration::ZERO; 2]; rates.hosts];
    let mut at = rng.around(rates.kill_every);
    while at < rates.duration && rates.hosts > 0 {
        let host = rng.below(rates.hosts);
        let process = match rng.below(10) {
            0..=3 => Process::Felix,
            4..=6 => Process::Node,
            _ => Process::Bird,
        };
        // BIRD is killed only while calico-node runs (which starts it again).
        let slot = match process {
            Process::Felix => 0,
            Process::Node | Process::Bird => 1,
        };
        if back_at[host][slot] <= at {
            steps.push(Step {
                at,
                action: Action::Kill { host, process },
            });
            if process != Process::Bird {
                let back = (at + rng.between(Duration::ZERO, rates.max_down)).min(rates.duration);
                back_at[host][slot] = back + Duration::from_millis(1);
                steps.push(Step {
                    at: back,
                    action: Action::Start { host, process },
                });
            }
        }
        at += rng.around(rates.kill_every);
    }
}

/// One host cut off at a time; returns each partition as (host, from, to).
fn partitions(
    rates: &Rates,
    rng: &mut Rng,
    steps: &mut Vec<Step>,
) -> Vec<(usize, Duration, Duration)> {
    let mut cuts = Vec::new();
    let mut at = rng.around(rates.partition_every);
    while at + rates.min_partition <= rates.duration && rates.hosts > 0 {
        let host = rng.below(rates.hosts);
        let heal = (at + rng.between(rates.min_partition, rates.max_partition)).min(rates.duration);
        outage(
            steps,
            (at, Action::Partition { host }),
            (heal, Action::Heal { host }),
        );
        cuts.push((host, at, heal));
        at = heal + rng.around(rates.partition_every);
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ten_minutes(seed: u64) -> (Rates, Vec<Step>) {
        let rates = Rates::standard(seed, Duration::from_secs(600), 3, 3);
        let plan = plan(&rates);
        (rates, plan)
    }

    #[test]
    fn ten_minutes_have_over_a_hundred_kills_of_each_kind_of_process() {
        for seed in 0..20 {
            let (_, plan) = ten_minutes(seed);
            let kills: Vec<Process> = plan
                .iter()
                .filter_map(|s| match s.action {
                    Action::Kill { process, .. } => Some(process),
                    _ => None,
                })
                .collect();
            assert!(kills.len() >= 100, "seed {seed}: {} kills", kills.len());
            for process in [Process::Felix, Process::Node, Process::Bird] {
                assert!(kills.contains(&process), "seed {seed}: no {process:?}");
            }
        }
    }

    #[test]
    fn whatever_goes_down_comes_back_before_the_end_and_never_twice() {
        for seed in 0..50 {
            let (rates, plan) = ten_minutes(seed);
            let mut down = std::collections::BTreeSet::new();
            let mut partitioned = None;
            let mut member_down = None;
            for step in &plan {
                assert!(step.at <= rates.duration);
                match step.action {
                    Action::Kill { host, process } if process != Process::Bird => {
                        assert!(down.insert((host, process)), "seed {seed}: {step:?} twice")
                    }
                    Action::Kill { host, .. } => assert!(
                        !down.contains(&(host, Process::Node)),
                        "seed {seed}: BIRD killed while calico-node is down"
                    ),
                    Action::Start { host, process } => assert!(down.remove(&(host, process))),
                    Action::Partition { host } => {
                        assert_eq!(partitioned, None, "seed {seed}: two partitions at once");
                        partitioned = Some((host, step.at));
                    }
                    Action::Heal { host } => {
                        let (cut, since) = partitioned.take().expect("healed after a partition");
                        assert_eq!(cut, host);
                        assert!(step.at - since <= rates.max_partition);
                    }
                    Action::StopMember { member } => {
                        assert_eq!(member_down, None, "seed {seed}: quorum at risk");
                        member_down = Some(member);
                    }
                    Action::StartMember { member } => {
                        assert_eq!(member_down.take(), Some(member))
                    }
                    Action::AddWorkload { host } => assert_ne!(
                        partitioned.map(|p| p.0),
                        Some(host),
                        "seed {seed}: a workload added on a host cut off from etcd"
                    ),
                    Action::RemoveWorkload { .. } | Action::EditPolicy { .. } => {}
                }
            }
            assert!(down.is_empty() && partitioned.is_none() && member_down.is_none());
        }
    }

    #[test]
    fn the_same_seed_gives_the_same_plan_and_another_seed_another() {
        assert_eq!(ten_minutes(7).1, ten_minutes(7).1);
        assert_ne!(ten_minutes(7).1, ten_minutes(8).1);
    }

    #[test]
    fn with_one_etcd_member_none_is_stopped() {
        let rates = Rates::standard(1, Duration::from_secs(600), 2, 1);
        assert!(
            plan(&rates)
                .iter()
                .all(|s| !matches!(s.action, Action::StopMember { .. }))
        );
    }
}
