//! The command line of `calicoctl`. Every flag and subcommand documents itself here; this is
//! what `--help` prints.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::help;
use crate::resource::kind::Kind;

/// Manage a Calico cluster through its datastore (etcd v3).
///
/// Keys and values are those of the Calico data model (see docs/data-model.md and docs/keys.md):
/// every value is validated before it is written, so an invalid object never reaches Felix.
#[derive(Debug, Parser)]
#[command(name = "calicoctl", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub etcd: EtcdArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// How to reach etcd: the flags every component takes (`--etcd-*`, `ETCD_*`).
pub use calico_datastore::EtcdArgs;

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create resources from a file of YAML or JSON documents; refuses any that exist
    #[command(after_help = help::CREATE_EXAMPLES)]
    Create(FileArgs),
    /// Create resources, or replace them if they exist (the usual way to write resources)
    #[command(after_help = help::APPLY_EXAMPLES)]
    Apply(FileArgs),
    /// Replace existing resources from a file; refuses any that do not exist
    #[command(after_help = help::REPLACE_EXAMPLES)]
    Replace(FileArgs),
    /// List resources of a kind as a table or as documents (get KIND [NAME]), or print the value
    /// at a key or every key under a prefix (get /calico/...)
    #[command(after_help = help::GET_EXAMPLES)]
    Get(GetArgs),
    /// Validate a value and write it at a key
    #[command(after_help = help::PUT_EXAMPLES)]
    Put(PutArgs),
    /// Delete resources (-f FILE, or KIND NAME), or a key (or with --prefix everything under a
    /// prefix) of the datastore
    #[command(after_help = help::DELETE_EXAMPLES)]
    Delete(DeleteArgs),
    /// Validate a value for a key without writing it; prints OK or the precise error
    #[command(after_help = help::VALIDATE_EXAMPLES)]
    Validate(ValidateArgs),
    /// Validate every key of a JSON bundle, then write them all (nothing is written if one is invalid)
    #[command(after_help = help::LOAD_EXAMPLES)]
    Load(LoadArgs),
    /// Work with label selectors
    Selector {
        #[command(subcommand)]
        command: SelectorCommand,
    },
    /// Work with tiered policy and profiles
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// This host: Felix's health and last status report, the endpoints it programmed, BGP
    /// sessions
    #[command(after_help = help::STATUS_EXAMPLES)]
    Status(StatusArgs),
    /// Collect what support needs from this host into one .tar.gz: versions, Felix and
    /// calico-node logs, iptables/ip6tables/ipset, the nf_tables ruleset (`nft -a list
    /// ruleset`: Felix's nftables backend), routes, neighbours, BIRD's protocols and routes,
    /// this host's keys, Felix's effective configuration. Works with etcd down
    #[command(after_help = help::DIAGS_EXAMPLES)]
    Diags(DiagsArgs),
    /// BGP nodes: this host's BGP sessions, the registered hosts; remove a host that is gone
    Node {
        #[command(subcommand)]
        command: NodeCommand,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    #[command(after_help = help::COMPLETION_EXAMPLES)]
    Completion {
        /// The shell to complete for
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// The datastore as a whole: migrate a Calico 1.4 datastore (etcd v2 API) into this one
    Datastore {
        #[command(subcommand)]
        command: DatastoreCommand,
    },
    /// IP address management: assign, release, show usage, check for leaks
    Ipam {
        #[command(subcommand)]
        command: IpamCommand,
    },
    /// Flow logs from the flow aggregator (calico-flows): who talked to whom, the verdict and
    /// the tier, policy and rule that decided it (and what staged policies would decide). Lists
    /// the flows (newest first), follows them live (--follow), or runs `policy explain` for one
    /// and compares it with the recorded trail (--explain). See docs/observability.md
    #[command(after_help = help::FLOWS_EXAMPLES, override_usage = help::FLOWS_USAGE)]
    Flows(FlowsArgs),
}

/// Where the flow aggregator is.
#[derive(Debug, Clone, Args)]
pub struct FlowsUrl {
    /// The flow aggregator, calico-flows (http://HOST:PORT; it serves no https)
    #[arg(
        long,
        env = "CALICO_FLOWS_URL",
        default_value = "http://127.0.0.1:7480",
        value_name = "URL"
    )]
    pub flows_url: String,
}

/// Which flows: the aggregator's filter (`calico_flowlog::FlowFilter`) as flags. Values of one
/// flag are alternatives (repeat it), different flags must all hold.
#[derive(Debug, Clone, Default, Args)]
pub struct FlowFilterArgs {
    /// Only flows whose source or destination key (or net) contains this text (repeatable)
    #[arg(long, value_name = "TEXT")]
    pub endpoint: Vec<String>,
    /// Only flows whose source or destination address is this IP or in this CIDR (repeatable)
    #[arg(long, value_name = "IP|CIDR")]
    pub address: Vec<String>,
    /// Only flows whose source or destination has this profile (repeatable)
    #[arg(long)]
    pub profile: Vec<String>,
    /// Only flows with a step (enforced or staged) in this tier (repeatable)
    #[arg(long)]
    pub tier: Vec<String>,
    /// Only flows with a step (enforced or staged) naming this policy or profile (repeatable)
    #[arg(long)]
    pub policy: Vec<String>,
    /// Only flows with this verdict (repeatable)
    #[arg(long, value_enum)]
    pub action: Vec<FlowActionArg>,
    /// Only flows reported by this host (repeatable)
    #[arg(long, value_name = "HOST")]
    pub reporter: Vec<String>,
    /// Only flows in this direction, relative to the reporting endpoint (repeatable)
    #[arg(long, value_enum)]
    pub direction: Vec<FlowDirectionArg>,
    /// Only flows that started at or after this time: a duration before now (15m, 2h, 1d) or
    /// an RFC 3339 time (2026-11-27T15:00:00Z)
    #[arg(long, value_name = "DURATION|TIME", value_parser = parse_flow_time)]
    pub since: Option<i64>,
    /// Only flows that started before this time: a duration before now or an RFC 3339 time
    #[arg(long, value_name = "DURATION|TIME", value_parser = parse_flow_time)]
    pub until: Option<i64>,
}

/// A flow's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlowActionArg {
    Allow,
    Deny,
}

/// A flow's direction relative to the reporting endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum FlowDirectionArg {
    Ingress,
    Egress,
}

/// A time bound as the aggregator's filter takes it: negative seconds before now for a
/// duration, unix seconds for an RFC 3339 time.
pub fn parse_flow_time(text: &str) -> Result<i64, String> {
    if let Ok(duration) = humantime::parse_duration(text) {
        return match i64::try_from(duration.as_secs()) {
            Ok(0) => Err(format!("{text:?} is under a second: give at least 1s")),
            Ok(secs) => Ok(-secs),
            Err(_) => Err(format!("{text:?} is too long a duration")),
        };
    }
    let time = humantime::parse_rfc3339_weak(text).map_err(|_| {
        format!(
            "{text:?} is neither a duration (15m, 2h, 1d) nor an RFC 3339 time \
             (2026-11-27T15:00:00Z)"
        )
    })?;
    let secs = time
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|_| format!("{text:?} is before 1970"))?
        .as_secs();
    i64::try_from(secs)
        .ok()
        .filter(|secs| *secs > 0)
        .ok_or_else(|| format!("{text:?} is out of range"))
}

/// A duration (15m, 2h).
fn parse_duration_arg(text: &str) -> Result<std::time::Duration, String> {
    match humantime::parse_duration(text) {
        Ok(duration) if duration.as_secs() >= 1 => Ok(duration),
        Ok(_) => Err(format!("{text:?} is under a second: give at least 1s")),
        Err(err) => Err(format!("{text:?}: {err} (expected e.g. 15m, 2h, 1d)")),
    }
}

/// The help heading of the flags that choose between listing, following and explaining.
const FORMS: &str = "List, follow or explain";

#[derive(Debug, Args)]
pub struct FlowsArgs {
    #[command(flatten, next_help_heading = "Which flows")]
    pub filter: FlowFilterArgs,
    /// Print flows as the aggregator receives them, until Ctrl-C (the live stream: from now on,
    /// so without --since, --until or --limit)
    #[arg(long, help_heading = FORMS, conflicts_with_all = ["since", "until", "limit", "explain", "id"])]
    pub follow: bool,
    /// The most flows listed, newest first (the aggregator's default: 1000; at most 10000)
    #[arg(long, help_heading = FORMS, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub limit: Option<u64>,
    /// Run `policy explain` for one flow and compare it with the trail the data plane recorded:
    /// the flow numbered N in the # column of the same listing (same filters), or the one
    /// --id names
    #[arg(long, help_heading = FORMS, value_name = "N", num_args = 0..=1)]
    pub explain: Option<Option<usize>>,
    /// Only the flow with this id (the ID column, or "id" in -o json): 16 hex digits
    #[arg(long, help_heading = FORMS, value_name = "ID")]
    pub id: Option<String>,
    #[command(
        flatten,
        next_help_heading = "The aggregator (every form; has a default)"
    )]
    pub aggregator: FlowsUrl,
    #[command(flatten, next_help_heading = "Output")]
    pub output: ReportOutput,
}

#[derive(Debug, Subcommand)]
pub enum DatastoreCommand {
    /// Copy every /calico/ key of a Calico 1.4 datastore (etcd's v2 API) into the v3 datastore
    /// (--etcd-endpoints). A dry run unless --apply: counts per kind of key, every key that does
    /// not validate (never copied), keys with a TTL (Felix status reports, never copied) and keys
    /// the v3 datastore holds with another value (refused unless --force). Keys v3 already holds
    /// with the same value are left alone, so a second run writes nothing.
    #[command(after_help = help::MIGRATE_EXAMPLES)]
    Migrate(MigrateArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Comma-separated endpoints (http:// or https://) of the etcd serving the v2 API (etcd
    /// 2.x, or 3.x with --enable-v2)
    #[arg(long, value_name = "ENDPOINTS")]
    pub from_v2: String,
    /// CA certificate that signed the v2 etcd's server certificate (needed for https)
    #[arg(long)]
    pub v2_ca_cert_file: Option<PathBuf>,
    /// Client certificate presented to the v2 etcd
    #[arg(long, requires = "v2_key_file")]
    pub v2_cert_file: Option<PathBuf>,
    /// Private key of that client certificate
    #[arg(long, requires = "v2_cert_file")]
    pub v2_key_file: Option<PathBuf>,
    /// Write the keys (without it, nothing is written)
    #[arg(long)]
    pub apply: bool,
    /// Overwrite keys the v3 datastore holds with another value
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub output: ReportOutput,
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// This host's BGP sessions as BIRD reports them: peer, type (mesh, rr, global, node),
    /// state, since, routes imported and exported. Runs `birdc` on calico-node's socket.
    #[command(after_help = help::NODE_STATUS_EXAMPLES)]
    Status(NodeStatusCmdArgs),
    /// The hosts registered for BGP: addresses, AS number, route reflector cluster id
    #[command(after_help = help::NODE_LIST_EXAMPLES)]
    List(ReportOutput),
    /// Remove a host that is gone from the datastore: its endpoints, per-host Felix config, BGP
    /// settings, Felix statuses, the addresses still assigned there and its block affinities.
    /// Asks for confirmation; refused while the host's Felix still reports status
    #[command(after_help = help::NODE_REMOVE_EXAMPLES)]
    Remove(NodeRemoveArgs),
}

#[derive(Debug, Args)]
pub struct NodeStatusCmdArgs {
    #[command(flatten)]
    pub bird: NodeStatusArgs,
    #[command(flatten)]
    pub output: ReportOutput,
}

/// `-o table|json|yaml` of the commands that print a report (status, node status|list, ipam
/// show, datastore migrate): the same [`Output`] the resources use, restricted to the three
/// formats a report has. The JSON and YAML shapes are documented in docs/calicoctl-ops.md.
#[derive(Debug, Clone, Copy, Args)]
pub struct ReportOutput {
    /// Output format: table (for people), or json or yaml (stable shapes for scripts)
    #[arg(short, long, default_value = "table", value_parser = report_formats())]
    pub output: Output,
}

/// The formats of a report, parsed into [`Output`].
fn report_formats() -> impl clap::builder::TypedValueParser<Value = Output> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(["table", "json", "yaml"])
        .map(|name| Output::from_str(&name, false).expect("a listed format"))
}

#[derive(Debug, Args)]
pub struct NodeRemoveArgs {
    /// The host's name, as Felix and calico-node know it
    pub host: String,
    /// Do not ask for confirmation
    #[arg(long, short)]
    pub yes: bool,
    /// Remove it even though its Felix still reports status (it will write some keys again
    /// while it runs)
    #[arg(long)]
    pub force: bool,
}

#[derive(Debug, Args)]
pub struct DiagsArgs {
    /// Where the archive is written
    #[arg(long, default_value_os_t = std::env::temp_dir())]
    pub output_dir: PathBuf,
    /// This host's name (default: the kernel's host name)
    #[arg(long, env = "NODENAME")]
    pub hostname: Option<String>,
    /// Felix's log (its LogFilePath; in a calico-lab: $CALICO_LAB_DIR/<lab>/felix-<host>.log)
    #[arg(long, default_value = "/var/log/calico/felix.log")]
    pub felix_log: PathBuf,
    /// calico-node's log (where its supervisor sends its output; in a calico-lab:
    /// $CALICO_LAB_DIR/<lab>/node-<host>.log)
    #[arg(long, default_value = "/var/log/calico/calico-node.log")]
    pub node_log: PathBuf,
    #[command(flatten)]
    pub bird: NodeStatusArgs,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// This host's name (default: the kernel's host name, as Felix uses it)
    #[arg(long, env = "NODENAME")]
    pub hostname: Option<String>,
    /// Felix's health endpoint (its HealthPort)
    #[arg(long, default_value = "http://127.0.0.1:9099")]
    pub felix_health_url: String,
    #[command(flatten)]
    pub bird: NodeStatusArgs,
    #[command(flatten)]
    pub output: ReportOutput,
}

#[derive(Debug, Args)]
pub struct NodeStatusArgs {
    /// BIRD's control socket (calico-node's --run-dir + /bird.ctl)
    #[arg(
        long,
        env = "CALICO_BIRD_SOCKET",
        default_value = "/var/run/calico/bird.ctl"
    )]
    pub bird_socket: std::path::PathBuf,
    /// The BIRD client
    #[arg(long, default_value = "birdc")]
    pub birdc: std::path::PathBuf,
}

#[derive(Debug, Subcommand)]
pub enum IpamCommand {
    /// Assign one given address (--ip) or a number of addresses from the pools (--ipv4/--ipv6)
    #[command(after_help = help::IPAM_ASSIGN_EXAMPLES)]
    Assign(IpamAssignArgs),
    /// Release addresses (--ip, repeatable), everything assigned to a handle (--handle), or a
    /// host's empty blocks (--empty-blocks-of)
    #[command(after_help = help::IPAM_RELEASE_EXAMPLES)]
    Release(IpamReleaseArgs),
    /// Show per-pool and per-block usage, or what one address is assigned to (--ip: its block,
    /// host, handle and attributes)
    #[command(after_help = help::IPAM_SHOW_EXAMPLES)]
    Show(IpamShowArgs),
    /// Report leaked addresses (assigned but used by no workload endpoint), handle records that
    /// disagree with the blocks, stale affinities and values that do not read (key, field, fix);
    /// exits 1 when something is wrong.
    /// An address assigned by a CNI ADD still in progress looks leaked for that moment.
    #[command(after_help = help::IPAM_CHECK_EXAMPLES)]
    Check(IpamCheckArgs),
    /// Claim or release one host's affinity to one block
    Block {
        #[command(subcommand)]
        command: IpamBlockCommand,
    },
    /// Show the IPAM settings, or change them (--strict-affinity, --auto-allocate-blocks)
    #[command(after_help = help::IPAM_CONFIG_EXAMPLES)]
    Config(IpamConfigArgs),
}

#[derive(Debug, Subcommand)]
pub enum IpamBlockCommand {
    /// Make the block affine to the host (creating it empty if it does not exist); refused when
    /// another host has it
    #[command(after_help = help::IPAM_BLOCK_EXAMPLES)]
    Claim(IpamBlockArgs),
    /// Give up the host's affinity to the block: an empty block is deleted, one holding
    /// addresses keeps them and is affine to no host
    #[command(after_help = help::IPAM_BLOCK_EXAMPLES)]
    Release(IpamBlockArgs),
}

#[derive(Debug, Args)]
pub struct IpamBlockArgs {
    /// The block, e.g. 10.65.0.64/26 (a /26 or /122 of a pool, or a whole smaller pool)
    pub cidr: ipnet::IpNet,
    /// The host whose affinity is claimed or released
    #[arg(long)]
    pub host: String,
}

#[derive(Debug, Args)]
pub struct IpamConfigArgs {
    /// Hosts assign only from their own blocks: no borrowing, no --ip in another host's block
    #[arg(long, value_name = "true|false")]
    pub strict_affinity: Option<bool>,
    /// Hosts claim new blocks when auto-assigning (false: only their claimed blocks, and
    /// borrowing); cannot be false while --strict-affinity is false
    #[arg(long, value_name = "true|false")]
    pub auto_allocate_blocks: Option<bool>,
}

#[derive(Debug, Args)]
pub struct IpamAssignArgs {
    /// The handle the addresses are assigned under (release them with --handle later)
    #[arg(long)]
    pub handle: String,
    /// The address to assign (it must lie in an enabled pool)
    #[arg(long, conflicts_with_all = ["ipv4", "ipv6"])]
    pub ip: Option<std::net::IpAddr>,
    /// How many IPv4 addresses to assign automatically
    #[arg(long, default_value_t = 0)]
    pub ipv4: usize,
    /// How many IPv6 addresses to assign automatically
    #[arg(long, default_value_t = 0)]
    pub ipv6: usize,
    /// The host whose blocks are used (and which claims a new block if needed)
    #[arg(long)]
    pub host: String,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("what").required(true).multiple(true).args(["ip", "handle", "empty_blocks_of", "host_gone"])))]
pub struct IpamReleaseArgs {
    /// An address to release (repeatable)
    #[arg(long)]
    pub ip: Vec<std::net::IpAddr>,
    /// Release every address of this handle
    #[arg(long)]
    pub handle: Option<String>,
    /// Give up this host's empty blocks (block and affinity), e.g. after removing the node;
    /// blocks still holding addresses are kept
    #[arg(long, value_name = "HOST")]
    pub empty_blocks_of: Option<String>,
    /// Give up every affinity of this host, which is gone: empty blocks are deleted, blocks
    /// still holding addresses keep them and become affine to no host (deleted with their last
    /// address)
    #[arg(long, value_name = "HOST", conflicts_with = "empty_blocks_of")]
    pub host_gone: Option<String>,
}

#[derive(Debug, Args)]
pub struct IpamShowArgs {
    /// Show the handle and attributes of this address instead of the usage
    #[arg(long)]
    pub ip: Option<std::net::IpAddr>,
    /// Also list every block with its host and usage (json and yaml always list them)
    #[arg(long)]
    pub blocks: bool,
    #[command(flatten)]
    pub output: ReportOutput,
}

#[derive(Debug, Args)]
pub struct IpamCheckArgs {
    /// Repair what was found (release leaked addresses, rewrite handle records from the blocks,
    /// remove stale affinities) after asking for confirmation
    #[arg(long)]
    pub fix: bool,
    /// Do not ask for confirmation before --fix repairs
    #[arg(long, short, requires = "fix")]
    pub yes: bool,
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Show how the policy in the datastore judges one packet at one endpoint: every tier,
    /// policy, profile and rule consulted, and what decided. Reads the live datastore.
    #[command(after_help = help::EXPLAIN_EXAMPLES)]
    Explain(ExplainArgs),
    /// Before applying a policy change: which endpoint pairs of the live model, and which
    /// recently observed flows (from the flow aggregator), would change verdict. Reads the
    /// datastore and the aggregator; writes nothing. The file holds policy, stagedPolicy
    /// (judged as the policy it would become), profile and tier documents, as apply reads
    /// them. See docs/observability.md for the probes and the limits
    #[command(after_help = help::IMPACT_EXAMPLES)]
    Impact(ImpactArgs),
}

#[derive(Debug, Args)]
pub struct ImpactArgs {
    /// The documents ('-' for stdin): policy, stagedPolicy, profile and tier, as `apply -f`
    /// reads them
    #[arg(short, long)]
    pub filename: PathBuf,
    /// The impact of deleting the resources the file names (as `delete -f`) instead of
    /// applying them
    #[arg(long)]
    pub delete: bool,
    /// How far back the observed flows are read
    #[arg(long, default_value = "15m", value_name = "DURATION", value_parser = parse_duration_arg)]
    pub since: std::time::Duration,
    /// Do not read observed flows (no aggregator is asked)
    #[arg(long, conflicts_with = "since")]
    pub no_flows: bool,
    #[command(flatten)]
    pub aggregator: FlowsUrl,
    #[command(flatten)]
    pub output: ReportOutput,
}

/// Inbound is traffic to the endpoint (its inbound rules), outbound traffic from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DirectionArg {
    Inbound,
    Outbound,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The endpoint's key: /calico/v1/host/<host>/workload/<orch>/<workload>/endpoint/<id>
    /// or /calico/v1/host/<host>/endpoint/<id>
    #[arg(long)]
    pub endpoint: String,
    /// Which of the endpoint's rules apply
    #[arg(long, value_enum, default_value_t = DirectionArg::Inbound)]
    pub direction: DirectionArg,
    /// Source address (default for outbound: the endpoint's first address)
    #[arg(long)]
    pub src: Option<std::net::IpAddr>,
    /// Destination address (default for inbound: the endpoint's first address)
    #[arg(long)]
    pub dst: Option<std::net::IpAddr>,
    /// Protocol name (tcp, udp, icmp, icmpv6, sctp, udplite) or number 1-255
    #[arg(long, default_value = "tcp")]
    pub protocol: String,
    /// Source port (tcp, udp, sctp, udplite)
    #[arg(long)]
    pub src_port: Option<u16>,
    /// Destination port (tcp, udp, sctp, udplite)
    #[arg(long)]
    pub dst_port: Option<u16>,
    /// ICMP type (icmp, icmpv6)
    #[arg(long)]
    pub icmp_type: Option<u8>,
    /// ICMP code (icmp, icmpv6)
    #[arg(long)]
    pub icmp_code: Option<u8>,
}

#[derive(Debug, Subcommand)]
pub enum SelectorCommand {
    /// Evaluate selectors against labels. Reads JSON lines {"selector": "...", "labels": {...}}
    /// on stdin and prints one line per input: true, false, or error: <reason>
    #[command(after_help = help::SELECTOR_EVAL_EXAMPLES)]
    Eval,
}

#[derive(Debug, Args)]
pub struct GetArgs {
    /// A kind of resource (tier, policy, stagedPolicy, profile, workloadEndpoint, hostEndpoint,
    /// ipPool, bgpPeer, node, felixConfig, ipamConfig, addressSpace, addressSpaceConfig,
    /// addressSpaceMapping; plurals, upstream's short names such as pol, spol, wep, ipp, and
    /// any case too), or a key or prefix of the datastore (starting with /)
    #[arg(value_parser = TargetParser, hide_possible_values = true)]
    pub target: String,
    /// Only the resources of this name (metadata.name)
    pub name: Option<String>,
    /// Output format: table (default for resources), wide (more columns), yaml or json
    /// (documents that apply takes back), text (default for keys)
    #[arg(short, long, value_enum)]
    pub output: Option<Output>,
    #[command(flatten)]
    pub filter: ResourceFilter,
}

/// The TARGET of `get` and `delete`: any text (a kind in any spelling, or a key), whose possible
/// values are the kinds' document spellings, so that shell completion offers them.
#[derive(Debug, Clone, Copy)]
pub struct TargetParser;

impl clap::builder::TypedValueParser for TargetParser {
    type Value = String;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(command, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        let kinds = Kind::ALL.into_iter().map(|kind| kind.as_str().into());
        Some(Box::new(kinds))
    }
}

/// Narrows the resources a `get` or `delete KIND NAME` names.
#[derive(Debug, Clone, Default, Args)]
pub struct ResourceFilter {
    /// Only the resources of this node (workloadEndpoint, hostEndpoint, bgpPeer, node,
    /// felixConfig)
    #[arg(long)]
    pub node: Option<String>,
    /// Only the policies of this tier
    #[arg(long)]
    pub tier: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// The value alone for a key; key and value lines for a prefix
    Text,
    /// Keys: a JSON bundle {"<key>": <value>, ...}, the format `calicoctl load` reads.
    /// Resources: the documents as JSON (a List without NAME)
    Json,
    /// Resources: an aligned table of the most useful columns
    Table,
    /// Resources: the table with every column
    Wide,
    /// Resources: the documents as YAML (a List without NAME)
    Yaml,
}

/// A file of resource documents.
#[derive(Debug, Args)]
pub struct FileArgs {
    /// YAML or JSON documents ('-' for stdin): several per file (---), a JSON list, or a
    /// `kind: List` with items
    #[arg(short, long)]
    pub filename: PathBuf,
    #[command(flatten)]
    pub txn: TxnArgs,
}

/// How many writes go in one etcd transaction.
#[derive(Debug, Clone, Copy, Args)]
pub struct TxnArgs {
    /// The most compares and writes per transaction: etcd's own --max-txn-ops (128 unless etcd
    /// runs with another value; ETCD_MAX_TXN_OPS is etcd's variable for it). A file is written
    /// in transactions of as many whole resources as fit, in the order of the file
    #[arg(long, env = "ETCD_MAX_TXN_OPS", default_value_t = 128, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub max_txn_ops: u32,
}

#[derive(Debug, Args)]
pub struct PutArgs {
    /// The key to write
    pub key: String,
    #[command(flatten)]
    pub value: ValueSource,
}

/// A value given inline or in a file.
#[derive(Debug, Args)]
pub struct ValueSource {
    /// The value, inline (use -f for a file)
    #[arg(conflicts_with = "file", required_unless_present = "file")]
    pub value: Option<String>,
    /// Read the value from FILE ('-' for stdin)
    #[arg(short, long)]
    pub file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// A kind of resource (with NAME), or a key of the datastore (starting with /)
    #[arg(
        required_unless_present = "filename",
        conflicts_with = "filename",
        value_parser = TargetParser,
        hide_possible_values = true
    )]
    pub target: Option<String>,
    /// The resource's metadata.name
    pub name: Option<String>,
    /// Delete the resources the documents of this file name ('-' for stdin)
    #[arg(short, long)]
    pub filename: Option<PathBuf>,
    /// Delete KEY and every key below it as a path: `--prefix /calico/v1/host/h2` takes
    /// /calico/v1/host/h2/..., never /calico/v1/host/h22/... (a prefix ends at a /)
    #[arg(long)]
    pub prefix: bool,
    /// Report resources that do not exist instead of refusing the whole file
    #[arg(long)]
    pub skip_missing: bool,
    #[command(flatten)]
    pub txn: TxnArgs,
    #[command(flatten)]
    pub filter: ResourceFilter,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// The key the value is meant for (its kind decides the object type)
    pub key: String,
    #[command(flatten)]
    pub value: ValueSource,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// A JSON object mapping keys to values ('-' for stdin); `get -o json` writes this format
    #[arg(short, long)]
    pub file: PathBuf,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every command that runs something (every leaf of the tree) shows examples in --help.
    #[test]
    fn every_command_has_examples() {
        let mut missing = Vec::new();
        let mut stack = vec![(String::from("calicoctl"), Cli::command())];
        while let Some((path, command)) = stack.pop() {
            let subcommands: Vec<_> = command.get_subcommands().cloned().collect();
            if subcommands.is_empty() || path == "calicoctl help" {
                let examples = command
                    .get_after_help()
                    .is_some_and(|text| text.to_string().contains("Examples:"));
                if !examples && !path.ends_with(" help") {
                    missing.push(path);
                }
                continue;
            }
            for sub in subcommands {
                stack.push((format!("{path} {}", sub.get_name()), sub));
            }
        }
        assert_eq!(missing, Vec::<String>::new(), "commands without examples");
    }
}
