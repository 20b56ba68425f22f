//! `serve-ref` / `obsync-refserver`: parse the flags, start the server, print the address on
//! the first stdout line, and stop gracefully on SIGTERM or SIGINT.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;

use crate::config::ServerConfig;
use crate::server::Server;

/// Largest `--inject-delay-us`: one second per version post is already far beyond any
/// sensitivity test, and keeps a typo from wedging the server.
const MAX_INJECT_DELAY_US: u64 = 1_000_000;

/// Run the reference obsync-v1 server.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port (printed on the first stdout line).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Data directory (created if missing): journal, nonce log, chunks, setup token.
    #[arg(long, required_unless_present = "version")]
    pub data: Option<PathBuf>,
    /// Share one fsync among concurrent journal (and nonce) records.
    #[arg(long)]
    pub group_commit: bool,
    /// Busy-wait this many microseconds in every version post (A/B sensitivity tests).
    #[arg(long, hide = true, default_value_t = 0)]
    pub inject_delay_us: u64,
    /// Allow listening on a non-loopback address.
    #[arg(long)]
    pub allow_remote: bool,
    // A flag of its own (not clap's automatic one) so that `vaultbench serve-ref --version`
    // answers too: the harness records it as the embedded target's build identity.
    /// Print `obsync-refserver <version>` and exit.
    #[arg(long)]
    pub version: bool,
}

/// What `--version` prints.
pub fn version_line() -> String {
    format!("obsync-refserver {}", env!("CARGO_PKG_VERSION"))
}

impl ServeArgs {
    /// Validates the flags into a server configuration.
    pub fn config(&self) -> anyhow::Result<ServerConfig> {
        if self.inject_delay_us > MAX_INJECT_DELAY_US {
            anyhow::bail!(
                "--inject-delay-us {} is over the maximum {MAX_INJECT_DELAY_US}",
                self.inject_delay_us
            );
        }
        let Some(data) = &self.data else {
            anyhow::bail!("--data DIR is required");
        };
        let mut cfg = ServerConfig::new(data);
        cfg.listen = self.listen;
        cfg.group_commit = self.group_commit;
        cfg.inject_delay_us = self.inject_delay_us;
        cfg.allow_remote = self.allow_remote;
        Ok(cfg)
    }
}

/// Serves until SIGTERM or SIGINT; returns exit code 0 after a graceful stop.
pub fn run(args: ServeArgs) -> anyhow::Result<i32> {
    if args.version {
        println!("{}", version_line());
        return Ok(0);
    }
    let cfg = args.config()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .thread_name(crate::WORKER_THREAD)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    rt.block_on(async move {
        use tokio::signal::unix::{SignalKind, signal};
        // Install the handlers before announcing the address, so a supervisor that signals
        // right after reading the line is never met by the default (abrupt) action.
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let server = Server::bind(cfg).await?;
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "listening on http://{}", server.local_addr())
                .and_then(|()| out.flush())
                .context("writing the listening line to stdout")?;
        }
        let data = args.data.as_deref().unwrap_or(std::path::Path::new("?"));
        eprintln!(
            "obsync-refserver: serving {} (data {})",
            server.local_addr(),
            data.display()
        );
        // A client pairs its first device with this token (`vaultbench load --setup-token-file`).
        eprintln!(
            "obsync-refserver: setup token in {}",
            data.join(crate::app::SETUP_TOKEN_FILE).display()
        );
        server
            .serve(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = int.recv() => {}
                }
            })
            .await;
        eprintln!("obsync-refserver: stopped");
        Ok(0)
    })
}
