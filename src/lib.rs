//! coord: a git-native, file-driven coordinator for work shared between AI agents and people.

pub mod board;
pub mod check;
pub mod config;
pub mod engine;
pub mod expr;
pub mod git;
pub mod lock;
pub mod model;
pub mod redact;
pub mod schema;
pub mod yaml;
