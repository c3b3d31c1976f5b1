//! coord: a git-native, file-driven coordinator for work shared between AI agents and people.
//!
//! Minimal module list for the `git-lock` branch; replaced on merge.

pub mod git;
pub mod lock;
