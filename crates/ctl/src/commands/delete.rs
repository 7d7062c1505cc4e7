//! `calicoctl delete KEY [--prefix]`. Deleting needs no validation (removing an invalid object
//! is how an operator cleans up), but a prefix delete must stay inside the Calico tree, and a
//! prefix is a path: `--prefix /calico/v1/host/h2` is the key `h2` and every key below `h2/`.
//! (`delete -f FILE` and `delete KIND NAME`, for resources, are `resource::delete`.)

use std::io::Write;
use std::process::ExitCode;

use calico_datastore::Datastore;
use calico_model::key::Prefix;

use crate::cli::DeleteArgs;

pub async fn run(
    store: &dyn Datastore,
    args: &DeleteArgs,
    out: &mut impl Write,
) -> anyhow::Result<ExitCode> {
    let key = match args.target.as_deref() {
        Some(key) if key.starts_with('/') && args.name.is_none() => key,
        Some(key) if key.starts_with('/') => {
            anyhow::bail!("unexpected NAME after a key: `delete KEY` takes one key or prefix")
        }
        _ => return super::resource::delete(store, args, out).await,
    };
    if args.prefix {
        check_prefix(key)?;
        // A prefix is a path: it ends at a `/`, so /calico/v1/host/h2 never takes h22's keys.
        let below = match key.ends_with('/') {
            true => key.to_owned(),
            false => format!("{key}/"),
        };
        let mut count = store.delete_prefix(&below).await?;
        if !key.ends_with('/') && store.delete(key).await? {
            count += 1;
        }
        writeln!(out, "deleted {count} keys")?;
        return Ok(ExitCode::SUCCESS);
    }
    if !store.delete(key).await? {
        anyhow::bail!("no such key: {key}");
    }
    writeln!(out, "OK")?;
    Ok(ExitCode::SUCCESS)
}

/// Refuses prefixes that would reach outside `/calico/...` or take the whole tree by accident.
fn check_prefix(prefix: &str) -> anyhow::Result<()> {
    let depth = prefix.trim_matches('/').split('/').count();
    if !Prefix::Calico.holds(prefix) || depth < 2 {
        anyhow::bail!(
            "refusing to delete prefix {prefix:?}: give a prefix below /calico/, e.g. /calico/v1/policy/tier/my-tier/"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_prefix;

    #[test]
    fn prefixes_must_stay_below_the_calico_tree() {
        for prefix in ["/", "/calico", "/calico/", "/other/x"] {
            let error = check_prefix(prefix).unwrap_err().to_string();
            assert!(
                error.contains(&format!("refusing to delete prefix {prefix:?}"))
                    && error.contains("give a prefix below /calico/"),
                "{error}"
            );
        }
        assert!(check_prefix("/calico/v1/").is_ok());
        assert!(check_prefix("/calico/v1/policy/tier/t1/").is_ok());
    }
}
