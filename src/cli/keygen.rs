//! `coord keygen <agent>`: creates an agent's signing key outside the repository, mode 0600,
//! never replacing one. Prints the key file's path, never the key.

use super::Ctx;
use crate::error::CliError;
use crate::model::AgentName;
use crate::sign;
use serde_json::json;

/// Arguments of `coord keygen`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The agent the key is for
    agent: AgentName,
}

/// Runs `coord keygen`.
pub fn run(ctx: &Ctx, args: Args) -> Result<(), CliError> {
    let dir = sign::key_dir_from_env().ok_or(sign::KeyError::NoHome)?;
    let path = sign::keygen(&dir, &args.agent)?;
    if ctx.json {
        super::print_answer(json!({"agent": args.agent, "path": path}));
    } else {
        out!("{}", path.display());
        ctx.status(&format!(
            "coord: give agent {} this key (or set {}); the coordinator needs it too",
            args.agent,
            args.agent.key_var()
        ));
    }
    Ok(())
}
