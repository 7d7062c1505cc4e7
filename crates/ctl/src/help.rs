//! The examples that end each command's `--help` (`after_help`), kept apart from the flags
//! in `cli.rs`. Every command that runs something has some (a unit test in `cli.rs` checks).

pub const COMPLETION_EXAMPLES: &str = "Examples:
  source <(calicoctl completion bash)                          # this shell
  calicoctl completion bash > /etc/bash_completion.d/calicoctl  # every new shell";

pub const MIGRATE_EXAMPLES: &str = "Examples:
  calicoctl datastore migrate --from-v2 http://10.0.0.1:2379            # dry run: the plan
  calicoctl datastore migrate --from-v2 http://10.0.0.1:2379 --apply    # write it
  calicoctl datastore migrate --from-v2 http://10.0.0.1:2379 -o json    # the plan for a script
  calicoctl datastore migrate --from-v2 http://10.0.0.1:2379 --apply --force
  calicoctl datastore migrate --from-v2 https://10.0.0.1:2379 --v2-ca-cert-file ca.pem \\
      --v2-cert-file client.pem --v2-key-file client.key

Exit status: 0 when the plan is (or was) carried out; keys that do not validate are listed and
not copied without failing the run. 1 when keys differ in v3 and --force is absent (nothing is
written), or when either datastore cannot be read or written.";

pub const NODE_REMOVE_EXAMPLES: &str = "Examples:
  calicoctl node remove host2                # shows what it holds, asks, removes
  calicoctl node remove host2 --yes --force  # Felix on host2 still reports; remove anyway

Exit status: 0 when removed (or nothing was there), 1 when refused or not confirmed.";

pub const DIAGS_EXAMPLES: &str = "Examples:
  calicoctl diags
  calicoctl diags --output-dir . --felix-log /run/calico-lab/demo/felix-host1.log \\
      --node-log /run/calico-lab/demo/node-host1.log --hostname host1

The last line names the archive. What could not be collected (a tool missing, etcd down, a log
not found) is listed before it and in not-collected.txt inside the archive; the exit status is
0 whenever the archive was written.";

pub const STATUS_EXAMPLES: &str = "Examples:
  calicoctl status
  calicoctl status --hostname host1 --felix-health-url http://127.0.0.1:9099
  calicoctl status -o json | jq .healthy

Each part says why it is missing (Felix's health port not reachable, no status report, BIRD not
answering, etcd down) instead of failing the report.
Exit status: 0 when Felix is live, ready and reporting its status; 1 otherwise.";

pub const CREATE_EXAMPLES: &str = "Examples:
  calicoctl create -f pools.yaml
  cat policy.yaml | calicoctl create -f -";

pub const APPLY_EXAMPLES: &str = "Examples:
  calicoctl apply -f policy.yaml
  calicoctl get policy -o yaml > all.yaml && calicoctl apply -f all.yaml   # changes nothing

  calicoctl apply -f profiles.yaml --max-txn-ops 512        # etcd runs with --max-txn-ops=512

Nothing is written if any document is invalid or refused. The resources of a file are written
in one transaction when they fit in etcd's --max-txn-ops (default 128), else in transactions of
as many whole resources as fit, in file order; if one fails, the error says which documents
were written and which were not. An empty List (the backup of a kind with no resources)
changes nothing. See docs/resources.md for every kind and field.";

pub const REPLACE_EXAMPLES: &str = "Examples:
  calicoctl replace -f policy.yaml";

pub const GET_EXAMPLES: &str = "Examples:
  calicoctl get policy                      # NAME, TIER, ORDER, SELECTOR
  calicoctl get policy web --tier my-tier -o yaml
  calicoctl get workloadEndpoint --node host1 -o wide
  calicoctl get ippools -o json
  calicoctl get pols                        # upstream's short names: pol(s), pro(s), wep(s),
                                            # hep(s), ipp(s), bgpp(s), bp(s), no(s)
  calicoctl get /calico/v1/policy/          # raw keys and values

-o yaml quotes every string a YAML 1.1 tool (PyYAML, Ansible) would read as something else
(\"20:30\", \"yes\", \"on\", \"~\"), so a file edited through such a tool applies back the same.";

pub const DELETE_EXAMPLES: &str = "Examples:
  calicoctl delete -f policy.yaml
  calicoctl delete policy web --tier my-tier
  calicoctl delete ipPool 10.65.0.0/16
  calicoctl delete /calico/v1/config/LogSeverityScreen
  calicoctl delete --prefix /calico/v1/policy/tier/my-tier   # the tier's keys, not my-tier2's
  calicoctl delete -f profiles.yaml --max-txn-ops 512          # etcd runs with --max-txn-ops=512

A prefix is a path: it ends at a /, so --prefix /calico/v1/host/h2 never deletes host h22's keys.";

pub const PUT_EXAMPLES: &str = "Examples:
  calicoctl put /calico/v1/policy/tier/my-tier/metadata '{\"order\": 100}'
  calicoctl put /calico/v1/policy/profile/web/rules -f rules.json
  calicoctl put /calico/v1/config/LogSeverityScreen info

The value is validated for its key first (as `validate` does); nothing is written if it is
invalid (exit status 1, the field and the reason on standard error).";

pub const VALIDATE_EXAMPLES: &str = "Examples:
  calicoctl validate /calico/v1/host/h1/endpoint/eth0 '{\"name\": \"eth0\"}'
  calicoctl validate /calico/v1/policy/tier/default/policy/web -f web.json

Exit status: 0 and OK when valid; 1 and `error: <field>: <reason>` when not.";

pub const LOAD_EXAMPLES: &str = "Examples:
  calicoctl get /calico/v1/policy/ -o json > policy.json && calicoctl load -f policy.json
  cat bundle.json | calicoctl load -f -

Every entry is validated first; if any is invalid, all problems are listed and nothing is
written (exit status 1).";

pub const NODE_STATUS_EXAMPLES: &str = "Examples:
  calicoctl node status
  calicoctl node status --bird-socket /run/calico-lab/demo/host1/bird.ctl
  calicoctl node status -o json";

pub const NODE_LIST_EXAMPLES: &str = "Examples:
  calicoctl node list
  calicoctl node list -o yaml";

pub const IPAM_ASSIGN_EXAMPLES: &str = "Examples:
  calicoctl ipam assign --handle my-vm --ipv4 1 --host host1
  calicoctl ipam assign --handle my-vm --ip 10.65.0.7 --host host1";

pub const IPAM_RELEASE_EXAMPLES: &str = "Examples:
  calicoctl ipam release --ip 10.65.0.7
  calicoctl ipam release --handle my-vm
  calicoctl ipam release --host-gone host2";

pub const IPAM_SHOW_EXAMPLES: &str = "Examples:
  calicoctl ipam show
  calicoctl ipam show --blocks
  calicoctl ipam show --ip 10.65.0.7
  calicoctl ipam show -o json           # pools and every block
  calicoctl ipam show --ip 10.65.0.7 -o yaml";

pub const IPAM_CHECK_EXAMPLES: &str = "Examples:
  calicoctl ipam check
  calicoctl ipam check --fix --yes";

pub const IPAM_CONFIG_EXAMPLES: &str = "Examples:
  calicoctl ipam config
  calicoctl ipam config --strict-affinity true";

pub const IPAM_BLOCK_EXAMPLES: &str = "Examples:
  calicoctl ipam block claim 10.65.0.64/26 --host host1
  calicoctl ipam block release 10.65.0.64/26 --host host1";

pub const EXPLAIN_EXAMPLES: &str = "Examples:
  calicoctl policy explain --endpoint /calico/v1/host/h1/workload/k8s/web/endpoint/eth0 \\
      --src 10.65.1.5 --protocol tcp --dst-port 80
  calicoctl policy explain --endpoint /calico/v1/host/h1/endpoint/eth0 --direction outbound \\
      --dst 192.0.2.1 --protocol icmp --icmp-type 8";

pub const SELECTOR_EVAL_EXAMPLES: &str = "Examples:
  echo '{\"selector\": \"role == \\\"db\\\"\", \"labels\": {\"role\": \"db\"}}' | calicoctl selector eval
  # prints: true";

/// `calicoctl flows`' usage: its three forms, each flag optional (both addresses have defaults,
/// and only `--explain` reads etcd).
pub const FLOWS_USAGE: &str = "calicoctl flows [FILTER...] [--limit N] [--id ID] [--flows-url URL] [-o FORMAT]
       calicoctl flows --follow [FILTER...] [--flows-url URL] [-o FORMAT]
       calicoctl flows --explain [N | --id ID] [FILTER...] [--flows-url URL] [--etcd-endpoints ENDPOINTS]";

pub const FLOWS_EXAMPLES: &str = "Examples:
  calicoctl flows                                   # the newest flows (at most 1000) as a table
  calicoctl flows --action deny --since 10m         # what was denied in the last ten minutes
  calicoctl flows --policy db-guard --endpoint ns.db -o json
  calicoctl flows --follow --action deny            # live, until Ctrl-C
  calicoctl flows --action deny --explain 1         # explain the newest denied flow now
  calicoctl flows --explain --id 5f3a9c0e12b4d687   # the same flow whichever its place
  calicoctl flows --flows-url http://10.99.0.1:7480 --since 2026-11-27T15:00:00Z

No flag is required. The aggregator is --flows-url, or CALICO_FLOWS_URL, or
http://127.0.0.1:7480. Only --explain reads the datastore (--etcd-endpoints, or ETCD_ENDPOINTS,
or http://127.0.0.1:2379): listing and --follow never touch etcd. --since and --until bound a
flow's start time: a duration before now (15m) or an RFC 3339 time. --explain says whether
`policy explain` agrees with the recorded trail; a disagreement is named as a policy changed
since, or a bug.
Exit status: 0 when the flows were listed (none is not an error) or --follow ended by Ctrl-C;
1 when the aggregator cannot be reached or the stream broke, or the flow to explain is not
found.";

pub const IMPACT_EXAMPLES: &str = "Examples:
  calicoctl policy impact -f db-guard.yaml              # before: calicoctl apply -f db-guard.yaml
  calicoctl policy impact -f old-policy.yaml --delete   # before: calicoctl delete -f old-policy.yaml
  calicoctl policy impact -f staged.yaml --since 1h     # promoting a staged policy
  calicoctl policy impact -f db-guard.yaml --no-flows -o json

Prints the endpoint pairs whose verdict changes for representative probes (the protocols and
ports the old and new rules name, a port no rule names, ICMP echo), then the flows observed in
the last --since that would change verdict. Writes nothing. The aggregator is --flows-url, or
CALICO_FLOWS_URL, or http://127.0.0.1:7480; when it cannot be reached, the endpoint pairs are
still printed and the flows are said not read.
Exit status: 0 when the impact was computed (whatever it is); 1 when a document is invalid or
refused (as apply would refuse it) or the datastore cannot be read.";
