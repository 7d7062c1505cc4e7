//! `calico-lab demo`: a two-host cluster, four workloads, and the seed examples applied step
//! by step as YAML resources with `calicoctl apply -f` (in `resources`; the raw form, `etcdctl
//! put` of each key, is shown once), with the connectivity matrix after each step; then a host
//! endpoint with its failsafe ports, and pool masquerade (in `host`). The cluster stays up
//! afterwards.

mod host;
mod narrate;
mod resources;

use std::time::Duration;

use crate::check::{matrix, render};
use crate::cluster::{self, UpOptions};
use crate::etcd::connect;
use crate::ready::{ADD_LIMIT, wait_programmed};
use crate::state::Lab;
use crate::workloads::{self, WorkloadSpec};
use narrate::say;
use resources::{FAILSAFE, PROFILES, WEBSERVER};

pub async fn run(name: &str) -> anyhow::Result<()> {
    let mut lab = match Lab::load(name) {
        Ok(lab) => {
            println!("lab {name:?} is already up; reusing it");
            lab
        }
        Err(_) => {
            say(
                "Bringing up two hosts (network namespaces), etcd on the fabric, calico-felix on each host",
            );
            cluster::up(
                name,
                &UpOptions {
                    hosts: 2,
                    flows: true,
                    ..UpOptions::default()
                },
            )
            .await?
        }
    };
    let workloads = [
        ("host1", "frontend", "10.65.0.10", "db-user", None),
        ("host2", "database", "10.65.0.20", "database", None),
        (
            "host1",
            "web",
            "10.65.0.30",
            "web",
            Some(("role", "webserver")),
        ),
        ("host2", "client", "10.65.0.40", "client", None),
    ];
    say(
        "Four workloads: frontend (profile db-user), database (profile database), web (label role=webserver, profile web), client (profile client). No profile exists yet, so every endpoint drops everything:",
    );
    for (host, wname, ip, profile, label) in workloads {
        if lab.workloads.iter().any(|w| w.name == wname) {
            continue;
        }
        let spec = WorkloadSpec {
            host: host.to_owned(),
            name: wname.to_owned(),
            ips: vec![ip.parse()?],
            profiles: vec![profile.to_owned()],
            labels: label
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        workloads::add_workload(&mut lab, &spec, ADD_LIMIT).await?;
        println!("  {wname:9} {ip:11} on {host}");
    }
    show(&lab, 5432).await?;

    say(
        "The seed's profiles: db-user (tag db-user) and database, which admits TCP 5432 from the db-user tag and ping from anyone. Only frontend reaches database on 5432:",
    );
    resources::apply(&lab, &PROFILES)?;
    let store = connect(&lab).await?;
    resources::show_raw(&store, "db-user").await?;
    show(&lab, 5432).await?;

    say(
        "web and client get open profiles (everything in, everything out), written the raw way: a profile's rules are one key:",
    );
    let open =
        r#"{"inbound_rules": [{"action": "allow"}], "outbound_rules": [{"action": "allow"}]}"#;
    for profile in ["web", "client"] {
        let key = calico_model::Key::ProfileRules {
            profile: profile.to_owned(),
        };
        host::put(&store, &key, open).await?;
    }
    show(&lab, 80).await?;

    say(
        "A tiered policy: my-tier's webserver policy selects role == \"webserver\" and allows only TCP 80 in. A tier that applies and does not allow drops the rest (ping to web now fails):",
    );
    resources::apply(&lab, &WEBSERVER)?;
    show(&lab, 80).await?;

    say(
        "The failsafe tier (order 0) comes first: it allows ICMP (and SSH from the management network), then passes the rest on with next-tier. Pings now get through everywhere; TCP is unchanged:",
    );
    resources::apply(&lab, &FAILSAFE)?;
    show(&lab, 80).await?;

    host::host_endpoint(&lab).await?;
    host::masquerade(&lab).await?;
    host::one_to_one_nat(&lab).await?;

    let cmd = if name == "calico-lab" {
        "calico-lab".to_owned()
    } else {
        format!("calico-lab --lab {name}")
    };
    let console = lab
        .flows_url
        .as_deref()
        .map(|url| format!("  calicoctl flows --action deny    # who was refused, and by which policy and rule\n  (the flow console: {url})\n"))
        .unwrap_or_default();
    println!(
        "\nThe lab stays up. Explore it:\n  eval \"$({cmd} env)\"\n  calicoctl get policy\n  calicoctl get profile db-user -o yaml\n{console}  {cmd} check --port 5432\n  {cmd} exec frontend -- ping -c1 10.65.0.20\nTear it down: {cmd} down"
    );
    Ok(())
}

async fn show(lab: &Lab, port: u16) -> anyhow::Result<()> {
    wait_programmed(lab, Duration::from_secs(60)).await?;
    let m = matrix(lab, port, Duration::from_millis(500)).await?;
    print!("{}", render(lab, &m, port));
    Ok(())
}
