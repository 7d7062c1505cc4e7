//! The `calico` plugin: IPAM (`calico-ipam` in this process, any other IPAM plugin as a child
//! process), a veth into the container, and the workload endpoint (with its network's profile)
//! in the datastore for Felix.
//!
//! ADD is a plan of steps with their undo (`plan`), run by one executor (`execute`), which
//! undoes everything it did when a later step fails, so a failed ADD leaves no address, veth
//! or endpoint behind. DEL is that undo read back from what exists, and succeeds whatever is
//! already gone. CHECK compares what exists with what ADD made (`check`).

use serde_json::Value;

use crate::config::NetConf;
use crate::delegate::IpamPlugin;
use crate::execute::{self, Call};
use crate::plan::Request;
use crate::runtime_config;
use crate::spec::{CniError, Command, Env, code};
use crate::workload::Workload;

/// One call of the plugin; returns what to print.
pub async fn run(env: &Env, conf: &NetConf, stdin: &[u8]) -> Result<Option<Value>, CniError> {
    runtime_config::refuse_unimplemented(&conf.capabilities)?;
    let workload = Workload::from_env(env, &conf.nodename())?;
    calico_model::names::validate_profile_id(&conf.name).map_err(|e| {
        CniError::new(
            code::INVALID_CONFIG,
            format!(
                "name {:?}: it names the network's profile: {}",
                conf.name, e.reason
            ),
        )
    })?;
    let call = Call {
        env,
        conf,
        stdin,
        ipam: IpamPlugin::of(conf)?,
        request: Request::new(env, conf, workload)?,
    };
    match env.command {
        Command::Add => execute::add(&call).await.map(Some),
        Command::Del => execute::del(&call).await.map(|()| None),
        Command::Check => crate::check::check(&call).await.map(|()| None),
        Command::Version => unreachable!("VERSION is answered before any plugin runs"),
    }
}
