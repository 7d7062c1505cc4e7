//! Bad input at volume for `parse_protocols`, which reads BIRD's `birdc show protocols all`
//! output: arbitrary bytes and mutated real output (BGP sessions up, down and failing, IPv4 and
//! IPv6, other protocols and channels between them). The parser is lenient by design (what it
//! cannot read it leaves out), so the properties are: no panic, no hang, and every session it
//! reports came from a BGP protocol line. Harness: `crates/model/tests/fuzzing/mod.rs`.

#[path = "../../model/tests/fuzzing/mod.rs"]
mod fuzzing;

use calico_bgp::parse_protocols;
use fuzzing::{Target, Verdict, ensure, input, run, text};

const OUTPUTS: &[&str] = &[
    "BIRD 2.0.12 ready.
Name       Proto      Table      State  Since         Info
device1    Device     ---        up     07:47:56.079
kernel_v4  Kernel     master4    up     07:47:56.079
  Channel ipv4
    Routes:         1 imported, 3 exported, 1 preferred
Mesh_10_99_0_12 BGP        ---        up     07:47:59.911  Established
  BGP state:          Established
    Neighbor address: 10.99.0.12
    Neighbor AS:      64512
  Channel ipv4
    State:          UP
    Routes:         2 imported, 1 exported, 2 preferred
Global_192_0_2_1 BGP        ---        start  07:48:01.000  Active        Socket: Connection refused
  BGP state:          Active
    Neighbor address: 192.0.2.1
",
    "BIRD 2.0.12 ready.
Name       Proto      Table      State  Since         Info
Mesh_fd00_99__12 BGP        ---        start  07:48:01.000  Active        Socket: Connection refused
  BGP state:          Active
    Neighbor address: fd00:99::12%eth0
  Channel ipv6
    Routes:         0 imported, 0 exported, 0 preferred
Node_10_0_0_9 BGP        ---        down   2024-01-01 10:00:00  Error: Hold timer expired
\tNeighbor address: 10.0.0.9
Rr_10_0_0_1 BGP  ---  up  07:00:00  Established
  Channel ipv4
    Routes:         18446744073709551615 imported, 7 exported
  Channel ipv6
    Routes:         18446744073709551615 imported, 7 exported
",
];

const TOKENS: &[&[u8]] = &[
    b" BGP ",
    b"Mesh_",
    b"Global_",
    b"Rr_",
    b"Node_",
    b"\n  ",
    b"\n\t",
    b"Neighbor address:",
    b"Routes:",
    b" imported,",
    b" exported,",
    b"%",
    b"Channel ipv4\n",
    b"---",
];

#[test]
fn bird_show_protocols_output() {
    let seeds: Vec<&[u8]> = OUTPUTS.iter().map(|s| s.as_bytes()).collect();
    let target = Target {
        name: "bgp birdc show protocols",
        seeds: &seeds,
        tokens: TOKENS,
    };
    run(
        target.name,
        |rng| text(&input(rng, &target)),
        |output| check(output),
    );
}

fn check(output: &str) -> Result<Verdict, String> {
    let sessions = parse_protocols(output);
    let protocol_lines = output
        .lines()
        .filter(|l| !l.starts_with([' ', '\t']) && l.split_whitespace().nth(1) == Some("BGP"))
        .count();
    ensure(sessions.len() <= protocol_lines, || {
        format!(
            "{} sessions from {protocol_lines} BGP protocol lines",
            sessions.len()
        )
    })?;
    for session in &sessions {
        ensure(
            !session.name.is_empty() && !session.name.contains(char::is_whitespace),
            || format!("a session named {:?}", session.name),
        )?;
    }
    Ok(match sessions.is_empty() {
        true => Verdict::Rejected,
        false => Verdict::Accepted,
    })
}

/// Fixed with this fuzzing: route counts near the top of u64, summed over channels,
/// overflowed (a panic in debug builds). They saturate.
#[test]
fn route_counts_past_u64_saturate() {
    let sessions = parse_protocols(OUTPUTS[1]);
    let rr = sessions
        .iter()
        .find(|s| s.name == "Rr_10_0_0_1")
        .expect("the Rr session");
    assert_eq!((rr.imported, rr.exported), (u64::MAX, 14));
}
