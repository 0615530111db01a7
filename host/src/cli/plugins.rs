//! `flowscale plugins`: what is in the plugins directory and whether it loads.

use std::io::Write;
use std::path::PathBuf;

use super::exit_codes;
use crate::plugins::run_plugins_command_verbose;

/// The plugins directory when neither `--plugins` nor `FLOWSCALE_PLUGINS_DIR` is given.
pub const DEFAULT_PLUGINS_DIR: &str = "plugins";

/// Arguments of `flowscale plugins`.
#[derive(Debug, Clone, clap::Args)]
pub struct PluginsArgs {
    /// The plugins directory.
    #[arg(long, value_name = "DIR", env = "FLOWSCALE_PLUGINS_DIR")]
    pub plugins: Option<PathBuf>,
    /// Print one JSON array, one object per plugin file.
    #[arg(long)]
    pub json: bool,
    /// Show abi_stable's full report under a layout refusal.
    #[arg(long)]
    pub verbose: bool,
}

impl PluginsArgs {
    /// The directory to scan.
    pub fn dir(&self) -> PathBuf {
        self.plugins
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PLUGINS_DIR))
    }
}

/// Runs `flowscale plugins`. Exit code 0 when every plugin file loaded, 1 when one was refused
/// (the listing is still complete) or the listing could not be written.
pub fn exec(args: PluginsArgs) -> u8 {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    match run_plugins_command_verbose(&args.dir(), args.json, args.verbose, &mut out)
        .and_then(|refused| out.flush().map(|()| refused))
    {
        Ok(false) => exit_codes::OK,
        Ok(true) => exit_codes::FAILED,
        Err(e) => {
            eprintln!("error: cannot write the plugin listing: {e}");
            exit_codes::FAILED
        }
    }
}
