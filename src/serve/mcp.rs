//! `/mcp`: the MCP server ([`crate::mcp`]) over MCP's streamable HTTP transport, for an LLM
//! agent on another machine. The router's guard has checked the request (Host, token, origin)
//! and put its [`Caller`] in the request's extensions, where each tool reads it: an agent's
//! token acts as that agent only. Each client session gets a server of its own (its own agents
//! to tell about); writes go through the hub's write queue in hub mode, and the snapshot is
//! read again after each, as the REST routes' writes are.

use super::hub::Hub;
use super::hubmode::HubMode;
use super::App;
use crate::mcp::{Server, Writes};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

pub use crate::mcp::Caller;

/// The path the MCP server answers at.
pub const PATH: &str = "/mcp";

/// Returns the streamable HTTP service of the MCP server for `app`.
pub fn service(app: &App) -> StreamableHttpService<Server, LocalSessionManager> {
    let writes: Arc<dyn Writes> = Arc::new(Queue {
        hub: Arc::clone(&app.hub),
        mode: app.mode.clone(),
    });
    let hub = Arc::clone(&app.hub);
    // The guard checks Host and Origin for every path alike, against the server's own names
    // (also those of --public-host), so the SDK's own loopback-only check is left off.
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_max_request_body_bytes(super::BODY_LIMIT);
    StreamableHttpService::new(
        move || Ok(Server::new(hub.opener(), None, Some(Arc::clone(&writes)))),
        Arc::new(LocalSessionManager::default()),
        config,
    )
}

/// The MCP server's writes as the REST routes make them: in a hub, one at a time in the
/// hub's write queue while its lease is held.
struct Queue {
    hub: Arc<Hub>,
    mode: Option<Arc<HubMode>>,
}

impl Writes for Queue {
    fn write(&self, write: &mut dyn FnMut()) -> Result<(), String> {
        match &self.mode {
            None => {
                write();
                Ok(())
            }
            Some(m) => m.write(write).map_err(|r| r.to_string()),
        }
    }

    fn written(&self) {
        self.hub.wrote();
        // A plain server reads here as the REST routes read after a write; a failed reading
        // is read again by the watcher.
        if self.mode.is_none() {
            let _ = self.hub.fresh();
        }
    }
}
