//! The task and agent data model: validated names, durations, states and the typed views of
//! task files (docs/files.md) with their gates, agent profiles (docs/files.md) and schedules. Pure
//! data, no I/O.

mod agent;
mod code;
mod duration;
mod endpoint;
pub mod gate;
mod history;
mod ids;
pub mod metrics;
pub mod schedule;
pub(crate) mod state;
mod task;
pub mod time;
pub mod translit;

pub use agent::{AgentCoord, AgentProfile, AssignMode, Circuit};
pub use code::ErrorCode;
pub use duration::{Duration, DurationError};
pub use endpoint::Endpoint;
pub use history::HistoryEntry;
pub use ids::{AgentName, NameError, TaskId};
pub use state::{Folder, State};
pub use task::{
    due_instant, Authority, CoordBlock, ErrorInfo, NextAgent, Priority, ResultStatus, Review,
    TaskResult, TaskSpec,
};
