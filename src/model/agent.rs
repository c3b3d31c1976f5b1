//! The agent profile `work/agents/<name>.yaml` (docs/files.md) and its circuit-breaker block.

use serde::{Deserialize, Serialize};

/// push: the tick assigns; pull: only `coord claim` takes work.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum AssignMode {
    /// The tick assigns tasks to the agent.
    #[default]
    Push,
    /// The agent takes work with `coord claim`.
    Pull,
}

impl AssignMode {
    /// Returns the name as written in profiles.
    pub fn as_str(self) -> &'static str {
        match self {
            AssignMode::Push => "push",
            AssignMode::Pull => "pull",
        }
    }
}

/// Circuit-breaker state.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub enum Circuit {
    /// Healthy: gets work.
    #[default]
    Closed,
    /// Tripped: gets no work until `open_until`.
    Open,
    /// One probe task allowed.
    HalfOpen,
}

impl Circuit {
    /// Returns the name as written in profiles.
    pub fn as_str(self) -> &'static str {
        match self {
            Circuit::Closed => "closed",
            Circuit::Open => "open",
            Circuit::HalfOpen => "half_open",
        }
    }
}

/// The coordinator-owned part of a profile.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct AgentCoord {
    /// Failed attempts in a row.
    pub consecutive_failures: u32,
    /// Breaker state.
    pub circuit: Circuit,
    /// When an open circuit half-opens.
    #[serde(
        skip_serializing_if = "Option::is_none",
        with = "super::time::recorded"
    )]
    pub open_until: Option<jiff::Timestamp>,
}

/// The person-owned part of a profile, with defaults applied.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default)]
pub struct AgentProfile {
    /// What the agent can do.
    pub capabilities: Vec<String>,
    /// WIP limit.
    pub max_active: u32,
    /// Disabled agents get no work.
    pub enabled: bool,
    /// push or pull.
    pub assign: AssignMode,
    /// Free text.
    pub description: Option<String>,
    /// Limits on what the agent spends; its circuit opens while one is reached.
    pub budget: Option<super::metrics::Budget>,
    /// Circuit breaker state.
    pub coord: AgentCoord,
}

impl Default for AgentProfile {
    fn default() -> Self {
        AgentProfile {
            capabilities: Vec::new(),
            max_active: 1,
            enabled: true,
            assign: AssignMode::Push,
            description: None,
            budget: None,
            coord: AgentCoord::default(),
        }
    }
}
