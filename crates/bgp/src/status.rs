//! Reading BIRD's `show protocols all` output: the BGP sessions of a host, for
//! `calicoctl node status`.

use std::net::IpAddr;

use crate::render::PeerKind;

/// One BGP session as BIRD reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// The protocol name (`Mesh_10_99_0_12`).
    pub name: String,
    /// How calico-node configured it (None for a protocol it did not make).
    pub kind: Option<PeerKind>,
    pub neighbor: Option<IpAddr>,
    /// up, down, start, …
    pub state: String,
    pub since: String,
    /// Established, Active, Connect, … with BIRD's last error if any.
    pub info: String,
    pub imported: u64,
    pub exported: u64,
}

/// The BGP protocols in `birdc show protocols all` output.
pub fn parse_protocols(text: &str) -> Vec<Session> {
    let mut sessions: Vec<Session> = Vec::new();
    let mut current: Option<Session> = None;
    for line in text.lines() {
        let indented = line.starts_with(' ') || line.starts_with('\t');
        if !indented {
            sessions.extend(current.take());
            let fields: Vec<&str> = line.split_whitespace().collect();
            // name proto table state since [info…]
            if fields.len() >= 5 && fields[1] == "BGP" {
                current = Some(Session {
                    name: fields[0].to_owned(),
                    kind: PeerKind::of_protocol(fields[0]),
                    neighbor: None,
                    state: fields[3].to_owned(),
                    since: fields[4].to_owned(),
                    info: fields[5..].join(" "),
                    imported: 0,
                    exported: 0,
                });
            }
            continue;
        }
        let Some(session) = current.as_mut() else {
            continue;
        };
        let line = line.trim();
        if let Some(address) = line.strip_prefix("Neighbor address:") {
            session.neighbor = address
                .trim()
                .split('%')
                .next()
                .and_then(|a| a.parse().ok());
        } else if let Some(routes) = line.strip_prefix("Routes:") {
            // "1 imported, 2 exported, 1 preferred" (summed over channels)
            for part in routes.split(',') {
                let mut words = part.split_whitespace();
                let (Some(count), Some(what)) = (words.next(), words.next()) else {
                    continue;
                };
                let count: u64 = count.parse().unwrap_or(0);
                // Saturating: the counts are BIRD's text, summed over channels, and a garbled
                // or hostile line must not overflow (a panic in debug builds).
                match what {
                    "imported" => session.imported = session.imported.saturating_add(count),
                    "exported" => session.exported = session.exported.saturating_add(count),
                    _ => {}
                }
            }
        }
    }
    sessions.extend(current);
    sessions
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "BIRD 2.0.12 ready.
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
";

    #[test]
    fn bgp_sessions_with_their_state_and_route_counts() {
        let sessions = parse_protocols(SAMPLE);
        assert_eq!(sessions.len(), 2);
        let mesh = &sessions[0];
        assert_eq!(mesh.kind, Some(PeerKind::Mesh));
        assert_eq!(mesh.neighbor, Some("10.99.0.12".parse().unwrap()));
        assert_eq!((mesh.imported, mesh.exported), (2, 1));
        assert_eq!(mesh.info, "Established");
        let global = &sessions[1];
        assert_eq!(global.kind, Some(PeerKind::Global));
        assert_eq!(global.state, "start");
        assert_eq!(global.info, "Active Socket: Connection refused");
    }
}
