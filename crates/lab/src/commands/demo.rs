//! `calico-lab demo`: the walk-through of the seed examples (in `calico_lab::demo`).

pub async fn run(name: &str) -> anyhow::Result<()> {
    calico_lab::demo::run(name).await
}
