//! coord: a git-native, file-driven coordinator for work shared between AI agents and people.

pub mod check;
pub mod config;
pub mod expr;
pub mod model;
pub mod schema;
pub mod yaml;
