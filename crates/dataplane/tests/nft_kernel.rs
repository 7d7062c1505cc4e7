//! The nf_tables backend against a real kernel, in a namespace made for the test: a full sync
//! of a state using every feature loads, reads back exactly as written (a second sync writes
//! nothing), and `nft` lists it.

use calico_calc::Calculator;
use calico_dataplane::{NftDataplane, RenderConfig, calico_table};
use calico_linux::Netns;
use calico_linux::nft::Nft;
use calico_testkit::NetNs;

mod common;

use common::{HOST, pool};

#[test]
fn a_full_sync_loads_and_reads_back_as_written() {
    let ns = NetNs::new("nftsync");
    let mut calc = Calculator::new(HOST);
    for (key, values) in pool() {
        calc.apply(&key, values[0].as_deref());
    }
    let nft = || Box::new(Nft::new(Netns::named(ns.name()), calico_table()));
    let mut dataplane = NftDataplane::with_kernel(nft(), RenderConfig::default());
    let repairs = dataplane
        .sync(calc.state())
        .expect("the kernel takes the table");
    assert!(repairs.written_chains > 20, "{repairs:?}");
    let listed = ns.run_ok("nft", &["list", "table", "inet", "calico"], "");
    assert!(listed.contains("chain filter-forward"), "{listed}");
    let mut restarted = NftDataplane::with_kernel(nft(), RenderConfig::default());
    let again = restarted.sync(calc.state()).unwrap();
    assert_eq!(
        (again.written_chains, again.written_sets),
        (0, 0),
        "{again:?}\n{listed}"
    );
}

#[test]
fn flow_log_statements_load_and_name_their_step() {
    let ns = NetNs::new("nftflowlog");
    let mut calc = Calculator::new(HOST);
    for (key, values) in pool() {
        calc.apply(&key, values[0].as_deref());
    }
    let config = RenderConfig {
        flow_logs: true,
        ..RenderConfig::default()
    };
    let nft = Box::new(Nft::new(Netns::named(ns.name()), calico_table()));
    let mut dataplane = NftDataplane::with_kernel(nft, config);
    dataplane
        .sync(calc.state())
        .expect("the kernel takes the logging rules");
    let listed = ns.run_ok("nft", &["list", "table", "inet", "calico"], "");
    let decoder = calico_dataplane::flowlog::Decoder::of(calc.state());
    let group = calico_dataplane::flowlog::NFLOG_GROUP;
    let logged: Vec<&str> = listed
        .lines()
        .filter(|l| l.contains(&format!("group {group}")))
        .collect();
    assert!(logged.len() > 10, "{listed}");
    for line in &logged {
        let prefix = line
            .split("log prefix \"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        assert!(decoder.decode(prefix).is_some(), "{prefix} in {line}");
    }
    assert!(
        logged.iter().any(|l| l.contains("end of tier"))
            && logged.iter().any(|l| l.contains("no profile matched")),
        "{listed}"
    );
}
