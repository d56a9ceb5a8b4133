//! `keyward-reconciler`: see `keyward_reconciler::cli::Cli` for flags.

use clap::Parser;

// jemalloc instead of glibc's malloc: the reconciler's heap is tens of thousands of small,
// long-lived cached objects allocated from a few tokio threads, with bursts of short-lived
// buffers (list pages, JSON bodies) on top. glibc keeps what it freed in per-thread arenas and
// returns little of it, so resident memory stays far above the live heap after the first sync;
// jemalloc with a background purging thread and short decay (set at build time in
// `.cargo/config.toml`, `JEMALLOC_SYS_WITH_MALLOC_CONF`; `_RJEM_MALLOC_CONF` overrides it at
// run time) hands freed pages back within about a second. Measured in docs/performance.md.
#[cfg(feature = "jemalloc")]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = keyward_reconciler::cli::Cli::parse();
    // The process runtime: crypto provider, logging, admin server, shutdown drain, Lease loop.
    let rt = keyward_reconciler::run::runtime(&cli).await?;
    keyward_reconciler::run::run(cli, rt).await
}
